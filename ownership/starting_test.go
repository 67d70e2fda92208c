package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// caller is a call for partition p of a node, admitted as the router's
// admission does (router/internal/admit.Hold, which this package cannot import):
// it asks Hold again at each routing change while the node answers that
// it is acquiring or releasing the partition.
type caller struct {
	first chan struct{} // closed at the first answer that makes it wait
	done  chan error    // nil once admitted; else the answer that ended the wait
	held  atomic.Pointer[Held]
}

// call starts a caller for partition p of n; onAdmitted runs as the work,
// before its Held is released.
func call(ctx context.Context, n *Node, p int, onAdmitted func(Held)) *caller {
	c := &caller{first: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		waited := false
		for {
			changed := n.Changed()
			h, err := n.HoldPartition(p)
			if err == nil {
				c.held.Store(&h)
				onAdmitted(h)
				h.Release()
				c.done <- nil
				return
			}
			var wo *WrongOwnerError
			if !errors.As(err, &wo) || !wo.Acquiring && !wo.Releasing {
				c.done <- err
				return
			}
			if !waited {
				waited = true
				close(c.first)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				c.done <- fmt.Errorf("%w: last answer: %w", ctx.Err(), err)
				return
			}
		}
	}()
	return c
}

// waiting waits until the caller has been told to wait.
func (c *caller) waiting(t *testing.T) {
	t.Helper()
	select {
	case <-c.first:
	case err := <-c.done:
		t.Fatalf("the call did not wait: %v", err)
	}
}

// blockingAcquired returns callbacks that add their events to tl and whose
// OnAcquired, for the tenures block says, waits until gate is closed or
// its tenure ends; returned is set once an OnAcquired has returned.
func blockingAcquired(tl *timeline, node string, gate <-chan struct{}, block func(Event) bool, returned *atomic.Bool) Callbacks {
	return Callbacks{
		OnAcquired: func(e Event) {
			tl.add("%s acquired %d@%d", node, e.Partition, e.Token.Epoch)
			if block(e) {
				select {
				case <-gate:
				case <-e.Context.Done():
				}
			}
			returned.Store(true)
			tl.add("%s returned %d@%d %v", node, e.Partition, e.Token.Epoch, context.Cause(e.Context))
		},
		OnReleased: func(e Event) { tl.add("%s released %d@%d %v", node, e.Partition, e.Token.Epoch, label(e.Reason)) },
	}
}

func always(Event) bool { return true }

// TestStartingAdmitsAfterOnAcquired: while OnAcquired runs, the partition
// is claimed and fenced but admits nothing: Hold says the node is
// acquiring it, Lookup does not report it Local, Ready is false. A call
// that arrives meanwhile waits and is admitted once OnAcquired has
// returned, not before.
func TestStartingAdmitsAfterOnAcquired(t *testing.T) {
	tl := newTimeline()
	gate := make(chan struct{})
	var returned atomic.Bool
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(t, "starting", "a", 1)
	cfg.AcquiredTimeout = time.Hour // only OnAcquired's return admits work here
	cfg.Metrics = reg
	cfg.Callbacks = blockingAcquired(tl, "a", gate, always, &returned)
	a := join(t, cluster.New(t, 1).NewClient(t), cfg)
	e := epochOf(t, tl, "a", 0)

	_, err := a.HoldPartition(0)
	var wo *WrongOwnerError
	require.ErrorAs(t, err, &wo)
	assert.True(t, wo.Acquiring, "%v", err)
	assert.Equal(t, "a", wo.Owner)
	r := a.LookupPartition(0)
	assert.False(t, r.Local)
	assert.Empty(t, r.Owner, "a node names itself only for what it serves")
	assert.False(t, a.Status().Ready)
	assert.Empty(t, a.Owned())
	assert.Empty(t, a.Status().Partitions)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var early atomic.Bool
	c := call(ctx, a, 0, func(h Held) {
		early.Store(!returned.Load())
		tl.add("a admitted %d@%d", h.Partition, h.Token.Epoch)
	})
	c.waiting(t)
	close(gate)
	require.NoError(t, <-c.done)
	assert.False(t, early.Load(), "work admitted before OnAcquired returned")
	inOrder(t, tl, "a returned 0@"+e+" <nil>", "a admitted 0@"+e)
	waitStable(t, 20*time.Second, a)
	assert.True(t, a.Status().Ready)
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_partition_acquired_timeouts_total", "a"))
}

// epochOf returns, as a string, the epoch of node's first OnAcquired of
// p, once it has been called.
func epochOf(t *testing.T, tl *timeline, node string, p int) string {
	t.Helper()
	prefix := fmt.Sprintf("%s acquired %d@", node, p)
	for {
		tl.mu.Lock()
		ch := tl.changed
		for _, e := range tl.entries {
			if len(e) > 7+len(prefix) && e[7:7+len(prefix)] == prefix {
				tl.mu.Unlock()
				return e[7+len(prefix):]
			}
		}
		tl.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("no %q", prefix)
		}
	}
}

// inOrder checks that tl holds entries, in this order.
func inOrder(t *testing.T, tl *timeline, entries ...string) {
	t.Helper()
	tl.mu.Lock()
	all := slices.Clone(tl.entries)
	tl.mu.Unlock()
	last := -1
	for _, e := range entries {
		i := slices.IndexFunc(all, func(x string) bool { return x[7:] == e })
		require.GreaterOrEqual(t, i, 0, "no %q in %q", e, all)
		require.Greater(t, i, last, "%q out of order in %q", e, all)
		last = i
	}
}

// TestStartingTimeout: an OnAcquired that does not return within
// Config.AcquiredTimeout no longer holds the partition's work back: the
// partition is admitted, and the node logs and counts it.
func TestStartingTimeout(t *testing.T) {
	tl := newTimeline()
	gate := make(chan struct{})
	var returned atomic.Bool
	reg := prometheus.NewPedanticRegistry()
	buf := &testsupport.Buffer{}
	cfg := testConfig(t, "starting-timeout", "a", 1)
	cfg.AcquiredTimeout = 200 * time.Millisecond
	cfg.Metrics = reg
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfg.Callbacks = blockingAcquired(tl, "a", gate, always, &returned)
	a := join(t, cluster.New(t, 1).NewClient(t), cfg)
	e := epochOf(t, tl, "a", 0)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var before atomic.Bool
	c := call(ctx, a, 0, func(Held) { before.Store(!returned.Load()) })
	require.NoError(t, <-c.done)
	assert.True(t, before.Load(), "admitted while OnAcquired still runs (the test holds it)")
	// Counted and logged before the admission was published.
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_partition_acquired_timeouts_total", "a"))
	line := findLog(logLines(t, buf), "acquired timeout", map[string]any{"@level": "warn", "partitions": "0", "epochs": e, "count": 1})
	require.NotNil(t, line, buf.String())
	assert.NotNil(t, line["timeout"])
	assert.True(t, a.LookupPartition(0).Local)
	assert.True(t, a.Status().Ready)

	// Its late return changes nothing.
	close(gate)
	tl.wait(t, "a returned 0@"+e+" <nil>")
	h, err := a.HoldPartition(0)
	require.NoError(t, err)
	h.Release()
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_partition_acquired_timeouts_total", "a"))
}

// TestStartingOptOut: with Config.AcquiredTimeout negative, a partition
// admits work as soon as it is fenced; OnAcquired runs once Lookup
// reports it Local, while work runs.
func TestStartingOptOut(t *testing.T) {
	tl := newTimeline()
	gate := make(chan struct{})
	defer close(gate)
	var returned atomic.Bool
	cfg := testConfig(t, "starting-off", "a", 1)
	cfg.AcquiredTimeout = -1
	cfg.Callbacks = blockingAcquired(tl, "a", gate, always, &returned)
	a := join(t, cluster.New(t, 1).NewClient(t), cfg)
	epochOf(t, tl, "a", 0)
	require.False(t, returned.Load())
	assert.True(t, a.LookupPartition(0).Local)
	assert.True(t, a.Status().Ready)
	h, err := a.HoldPartition(0)
	require.NoError(t, err, "admitted while OnAcquired runs")
	h.Release()
	require.False(t, returned.Load())
}

// TestStartingEnds: a tenure that ends while its OnAcquired runs (a loss,
// a move away, Close) admits no work, ends as a served tenure does, and
// gets its OnReleased after its OnAcquired has returned.
func TestStartingEnds(t *testing.T) {
	etcd := cluster.New(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	never := make(chan struct{}) // the tenures blocked wait for their end

	t.Run("lost", func(t *testing.T) {
		tl := newTimeline()
		var returned atomic.Bool
		var first atomic.Int64
		cfg := testConfig(t, "starting-lost", "a", 1)
		cfg.Callbacks = blockingAcquired(tl, "a", never, func(e Event) bool {
			return first.CompareAndSwap(0, e.Token.Epoch) // the first tenure only
		}, &returned)
		a := join(t, etcd.NewClient(t), cfg)
		e1 := epochOf(t, tl, "a", 0)
		c := call(ctx, a, 0, func(h Held) { tl.add("a admitted %d@%d", h.Partition, h.Token.Epoch) })
		c.waiting(t)
		op, err := fleet.NewOperator(etcd.NewClient(t), fleet.OperatorConfig{Cluster: "starting-lost"})
		require.NoError(t, err)
		_, err = op.ForceRelease(ctx, fence.PartitionScope(0), fleet.Action{Actor: "test", Reason: "lost while starting"})
		require.NoError(t, err)
		require.NoError(t, <-c.done)
		e2 := fmt.Sprint(c.held.Load().Token.Epoch)
		require.NotEqual(t, e1, e2, "admitted under the next tenure only")
		inOrder(t, tl, "a acquired 0@"+e1, "a returned 0@"+e1+" "+ErrLost.Error(), "a released 0@"+e1+" lost",
			"a acquired 0@"+e2, "a returned 0@"+e2+" <nil>", "a admitted 0@"+e2)
	})

	t.Run("moved", func(t *testing.T) {
		const parts = 4
		p := movingPartition(t, parts, []string{"a"}, "a", "b")
		tl := newTimeline()
		var returnedA, returnedB atomic.Bool
		cfgA := testConfig(t, "starting-moved", "a", parts)
		cfgA.Callbacks = blockingAcquired(tl, "a", never, func(e Event) bool { return e.Partition == p }, &returnedA)
		a := join(t, etcd.NewClient(t), cfgA)
		e1 := epochOf(t, tl, "a", p)
		c := call(ctx, a, p, func(h Held) { t.Errorf("a admitted %d@%d", h.Partition, h.Token.Epoch) })
		c.waiting(t)
		cfgB := testConfig(t, "starting-moved", "b", parts)
		cfgB.Callbacks = blockingAcquired(tl, "b", never, func(Event) bool { return false }, &returnedB)
		b := join(t, etcd.NewClient(t), cfgB)
		waitStable(t, 30*time.Second, a, b)
		err := <-c.done
		var wo *WrongOwnerError
		require.ErrorAs(t, err, &wo)
		assert.Equal(t, "b", wo.Owner)
		e2 := epochOf(t, tl, "b", p)
		ps := fmt.Sprint(p)
		inOrder(t, tl, "a acquired "+ps+"@"+e1, "a returned "+ps+"@"+e1+" "+ErrMoved.Error(),
			"a released "+ps+"@"+e1+" moved", "b acquired "+ps+"@"+e2)
	})

	t.Run("closed", func(t *testing.T) {
		tl := newTimeline()
		var returned atomic.Bool
		cfg := testConfig(t, "starting-closed", "a", 1)
		cfg.Callbacks = blockingAcquired(tl, "a", never, always, &returned)
		cli := etcd.NewClient(t)
		a := join(t, cli, cfg)
		e := epochOf(t, tl, "a", 0)
		c := call(ctx, a, 0, func(h Held) { t.Errorf("a admitted %d@%d", h.Partition, h.Token.Epoch) })
		c.waiting(t)
		require.NoError(t, a.Close(ctx))
		// The call ends unadmitted: the node closed (or, while it closes,
		// says that its session ended, or that it no longer owns the
		// partition and knows no owner: it released it on its way out).
		err := <-c.done
		require.True(t, errors.Is(err, ErrClosed) || errors.Is(err, ErrLost) || errors.Is(err, ErrNotOwner), "%v", err)
		inOrder(t, tl, "a acquired 0@"+e, "a returned 0@"+e+" "+ErrClosed.Error(), "a released 0@"+e+" closed")
		assert.Zero(t, etcdClaims(t, cli, "starting-closed")[0].Epoch, "the claim is deleted")
	})
}

// The acquired timeout defaults to 10s; negative turns the starting phase
// off, and so does the lack of an OnAcquired.
func TestAcquiredTimeoutConfig(t *testing.T) {
	assert.Equal(t, 10*time.Second, DefaultConfig().AcquiredTimeout)
	cfg := testConfig(t, "c", "a", 4)
	cfg.AcquiredTimeout = 0
	assert.Equal(t, 10*time.Second, cfg.withDefaults().AcquiredTimeout)
	cfg.AcquiredTimeout = -1
	require.NoError(t, cfg.Validate())
	n := &Node{cfg: cfg.withDefaults()}
	assert.False(t, n.startsFirst(), "negative: off")
	n.cfg.AcquiredTimeout = time.Second
	assert.False(t, n.startsFirst(), "no OnAcquired: nothing to wait for")
	n.cfg.Callbacks.OnAcquired = func(Event) {}
	assert.True(t, n.startsFirst())
}
