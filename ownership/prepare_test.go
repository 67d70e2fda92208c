package ownership

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// timeline records, in one order across the nodes of a test, what their
// callbacks saw.
type timeline struct {
	mu      sync.Mutex
	entries []string
	changed chan struct{}
	acq     map[string]Event // "<node>/<p>": the last EventAcquired
	causes  map[string]error // "<node>/<p>": the cause of the last preparation's end
}

func newTimeline() *timeline {
	return &timeline{changed: make(chan struct{}), acq: map[string]Event{}, causes: map[string]error{}}
}

func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.entries = append(tl.entries, time.Now().Format("05.000 ")+fmt.Sprintf(format, args...))
	close(tl.changed)
	tl.changed = make(chan struct{})
}

// index returns the position of entry, -1 if absent.
func (tl *timeline) index(entry string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.IndexFunc(tl.entries, func(e string) bool { return e[7:] == entry })
}

// wait waits until entry has been added.
func (tl *timeline) wait(t *testing.T, entry string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		tl.mu.Lock()
		found, ch := slices.ContainsFunc(tl.entries, func(e string) bool { return e[7:] == entry }), tl.changed
		tl.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			tl.mu.Lock()
			defer tl.mu.Unlock()
			t.Fatalf("no %q in %q", entry, tl.entries)
		}
	}
}

func (tl *timeline) acquired(node string, p int) Event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.acq[fmt.Sprintf("%s/%d", node, p)]
}

func (tl *timeline) cause(node string, p int) error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.causes[fmt.Sprintf("%s/%d", node, p)]
}

// callbacks returns node's callbacks: each one is added to the timeline,
// and OnPrepare runs prepare (nil: returns at once) and records how its
// context ended.
func (tl *timeline) callbacks(node string, prepare func(e Event) error) Callbacks {
	return Callbacks{
		OnAcquired: func(e Event) {
			tl.mu.Lock()
			tl.acq[fmt.Sprintf("%s/%d", node, e.Partition)] = e
			tl.mu.Unlock()
			tl.add("%s acquired %d prepared=%v", node, e.Partition, !e.Prepared.IsZero())
		},
		OnReleased: func(e Event) { tl.add("%s released %d %v", node, e.Partition, label(e.Reason)) },
		OnPrepare: func(e Event) error {
			tl.add("%s prepare %d from %s", node, e.Partition, e.Holder)
			context.AfterFunc(e.Context, func() {
				tl.mu.Lock()
				tl.causes[fmt.Sprintf("%s/%d", node, e.Partition)] = context.Cause(e.Context)
				tl.mu.Unlock()
				tl.add("%s prepare %d over", node, e.Partition)
			})
			var err error
			if prepare != nil {
				err = prepare(e)
			}
			tl.add("%s prepared %d", node, e.Partition)
			return err
		},
	}
}

// movingTwice returns a partition that a owns alone, b owns once it has
// joined and c owns once it has joined too.
func movingTwice(t *testing.T, parts int) int {
	t.Helper()
	cfg := ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor}
	ab, err := ring.New([]string{"a", "b"}, cfg)
	require.NoError(t, err)
	abc, err := ring.New([]string{"a", "b", "c"}, cfg)
	require.NoError(t, err)
	for p := range parts {
		if o, _ := ab.Owner(p); o == "b" {
			if o, _ := abc.Owner(p); o == "c" {
				return p
			}
		}
	}
	t.Fatal("no partition moves from b to c")
	return -1
}

// TestPrepareWarmHandoff shows a planned move with a prepare phase: the
// successor prepares while the holder serves, holds no token meanwhile,
// and the holder hands off only once the successor is ready; the new
// owner's OnAcquired says it was prepared, and its epoch fences the old
// owner out. No write under the successor's token can happen before its
// claim: the floor stays the holder's until the claim, and the successor
// admits no work for the partition while it prepares.
func TestPrepareWarmHandoff(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm", 16
	tl := newTimeline()
	var gate fence.Gate
	fencers := []fence.Fencer{&gate}

	cfgA := testConfig(t, name, "a", parts)
	cfgA.Fencers = fencers
	cfgA.Callbacks = tl.callbacks("a", nil)
	cfgA.WarmTimeout = time.Minute // the move waits for b, however long
	reg := prometheus.NewRegistry()
	cfgA.Metrics = reg
	buf := &testsupport.Buffer{}
	cfgA.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)

	p := movingPartition(t, parts, []string{"a"}, "a", "b")
	held, err := a.HoldPartition(p)
	require.NoError(t, err)
	epochA := held.Token.Epoch
	held.Release()

	release := make(chan struct{})
	var b *Node
	bSet := make(chan struct{}) // b is assigned
	type seen struct {
		token     bool
		holdErr   error
		aServes   bool
		floor     int64
		contextOK bool
	}
	seenC := make(chan seen, 1)
	cfgB := testConfig(t, name, "b", parts)
	cfgB.Fencers = fencers
	cfgB.WarmTimeout = time.Minute
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		if e.Partition != p {
			return nil
		}
		<-bSet
		_, tok := fence.FromContext(e.Context)
		_, herr := b.HoldPartition(p)
		h, aerr := a.HoldPartition(p)
		if aerr == nil {
			h.Release()
		}
		seenC <- seen{token: tok, holdErr: herr, aServes: aerr == nil, floor: gate.Floor(fence.PartitionScope(p)), contextOK: e.Token == fence.Token{}}
		select {
		case <-release:
			return nil
		case <-e.Context.Done():
			return context.Cause(e.Context)
		}
	})
	b = join(t, c.NewClient(t), cfgB)
	close(bSet)

	var s seen
	select {
	case s = <-seenC:
	case <-time.After(30 * time.Second):
		t.Fatal("b was not asked to prepare")
	}
	require.False(t, s.token, "the preparation's context carries no token")
	require.True(t, s.contextOK, "the prepare event carries no token")
	require.ErrorIs(t, s.holdErr, ErrNotOwner, "b admits no work for a partition it prepares")
	require.True(t, s.aServes, "a serves the partition while b prepares")
	require.Equal(t, epochA, s.floor, "the floor is a's while b prepares")

	// a still serves p, however long b prepares: other partitions move.
	r := a.LookupPartition(p)
	require.True(t, r.Local)
	close(release)

	tl.wait(t, fmt.Sprintf("b acquired %d prepared=true", p))
	waitStable(t, 30*time.Second, a, b)
	require.Less(t, tl.index(fmt.Sprintf("a released %d moved", p)), tl.index(fmt.Sprintf("b acquired %d prepared=true", p)))
	e := tl.acquired("b", p)
	require.Greater(t, e.Token.Epoch, epochA)
	require.False(t, e.Prepared.IsZero())
	require.Equal(t, e.Token.Epoch, gate.Floor(fence.PartitionScope(p)))
	require.ErrorIs(t, gate.Check(fence.Token{Scope: fence.PartitionScope(p), Epoch: epochA}), fence.ErrStale)
	require.ErrorIs(t, tl.cause("b", p), ErrMoveCompleted)
	moved := float64(len(mustRing(t, []string{"a", "b"}, cfgA.Ring).Owned("b")))
	require.Equal(t, moved, metricOf(t, reg, "tenure_partition_prepare_duration_seconds", "a", "outcome", "warm"))
	require.Zero(t, metricOf(t, reg, "tenure_partition_prepare_duration_seconds", "a", "outcome", "cold"))
	waitLogged(t, buf, 20*time.Second, func(lines []map[string]any) error {
		if findLog(lines, "released ", map[string]any{"node": "a", "reason": "moved", "cold": 0, "prepare": nil, "handoff": nil}) == nil {
			return fmt.Errorf("no released line with both phases")
		}
		return nil
	})
}

// TestPrepareHungSuccessor shows that a successor that never finishes
// preparing delays the move by the warm timeout at most: the move then
// goes on cold, the new owner's OnAcquired says it was not prepared, and
// the holder counts the prepare phase as timed out.
func TestPrepareHungSuccessor(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts, warm = "warm-hung", 8, time.Second
	tl := newTimeline()
	reg := prometheus.NewRegistry()
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = warm
	cfgA.Metrics = reg
	buf := &testsupport.Buffer{}
	cfgA.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfgA.Callbacks = tl.callbacks("a", nil)
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)

	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = warm
	started := time.Now()
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		<-e.Context.Done() // never ready
		return context.Cause(e.Context)
	})
	b := join(t, c.NewClient(t), cfgB)
	waitStable(t, 30*time.Second, a, b)
	took := time.Since(started)

	moved, err := ring.New([]string{"a", "b"}, cfgA.Ring)
	require.NoError(t, err)
	for _, p := range moved.Owned("b") {
		require.True(t, tl.acquired("b", p).Prepared.IsZero(), "partition %d", p)
		require.ErrorIs(t, tl.cause("b", p), ErrMoveCompleted, "partition %d", p)
	}
	n := len(moved.Owned("b"))
	require.NotZero(t, n)
	require.Equal(t, float64(n), metricOf(t, reg, "tenure_partition_prepare_duration_seconds", "a", "outcome", "cold"))
	require.Zero(t, metricOf(t, reg, "tenure_partition_prepare_duration_seconds", "a", "outcome", "warm"))
	// The move's one line says how long each phase took: the prepare
	// phase the whole warm timeout, every partition cold.
	waitLogged(t, buf, 20*time.Second, func(lines []map[string]any) error {
		l := findLog(lines, "released ", map[string]any{"node": "a", "reason": "moved", "count": n, "warm": 0, "cold": n, "prepare": nil, "handoff": nil})
		if l == nil {
			return fmt.Errorf("no released line with both phases")
		}
		if d, _ := l["prepare"].(float64); time.Duration(d) < warm { // JSON: nanoseconds
			return fmt.Errorf("prepare %v, want at least %v", l["prepare"], warm)
		}
		return nil
	})
	// Not a timed assertion of the move: a bound far above what a move
	// costs, that a wait for the preparation without a timeout would break.
	require.Less(t, took, warm+20*time.Second)
}

// TestPrepareSuccessorCrash shows that a successor that crashes while
// preparing costs the holder nothing when the warm timeout outlasts the
// successor's lease: the holder serves on, and once the successor's
// member key has expired the ring gives the partition back and the move
// is called off, without a handoff.
func TestPrepareSuccessorCrash(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm-crash-b", 8
	tl := newTimeline()
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = time.Minute
	cfgA.Callbacks = tl.callbacks("a", nil)
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)
	before := map[int]int64{}
	for _, p := range a.Owned() {
		before[p] = a.LookupPartition(p).Epoch
	}

	cliB := c.NewClient(t)
	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Minute
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		<-e.Context.Done()
		return context.Cause(e.Context)
	})
	b := join(t, cliB, cfgB)
	p := movingPartition(t, parts, []string{"a"}, "a", "b")
	tl.wait(t, fmt.Sprintf("b prepare %d from a", p))
	require.NoError(t, cliB.Close()) // b crashes: its lease expires
	<-b.Done()

	waitStable(t, 30*time.Second, a)
	for q, epoch := range before {
		require.Equal(t, epoch, a.LookupPartition(q).Epoch, "partition %d kept its tenure", q)
		require.Equal(t, -1, tl.index(fmt.Sprintf("a released %d moved", q)), "partition %d was handed off", q)
	}
}

// TestPrepareHolderCrash shows that a holder that crashes while its
// successor prepares is a failover as without a prepare phase: the
// successor claims once the holder's lease has expired, its preparation
// ends there, and it serves the partition unprepared.
func TestPrepareHolderCrash(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm-crash-a", 8
	tl := newTimeline()
	cliA := c.NewClient(t)
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = time.Minute
	cfgA.Callbacks = tl.callbacks("a", nil)
	a := join(t, cliA, cfgA)
	waitStable(t, 30*time.Second, a)
	p := movingPartition(t, parts, []string{"a"}, "a", "b")
	epochA := a.LookupPartition(p).Epoch

	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Minute
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		<-e.Context.Done()
		return context.Cause(e.Context)
	})
	b := join(t, c.NewClient(t), cfgB)
	tl.wait(t, fmt.Sprintf("b prepare %d from a", p))
	require.NoError(t, cliA.Close()) // a crashes while b prepares
	<-a.Done()

	tl.wait(t, fmt.Sprintf("b acquired %d prepared=false", p))
	waitStable(t, 30*time.Second, b)
	require.Greater(t, tl.acquired("b", p).Token.Epoch, epochA)
	require.ErrorIs(t, tl.cause("b", p), ErrMoveCompleted)
	tl.wait(t, fmt.Sprintf("a released %d lost", p))
}

// TestPrepareRacesRingChange shows a preparation that a second ring
// change calls off: b prepares a partition that c's arrival then gives to
// c; b's preparation ends with ErrMoveCalledOff, c prepares it, and the
// holder hands it to c, prepared, within the deadline of the first move.
func TestPrepareRacesRingChange(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm-race", 32
	tl := newTimeline()
	p := movingTwice(t, parts)
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = time.Minute
	cfgA.Callbacks = tl.callbacks("a", nil)
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)

	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Minute
	var hung atomic.Bool
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		if e.Partition != p || !hung.CompareAndSwap(false, true) {
			return nil
		}
		<-e.Context.Done()
		return context.Cause(e.Context)
	})
	b := join(t, c.NewClient(t), cfgB)
	tl.wait(t, fmt.Sprintf("b prepare %d from a", p))

	cfgC := testConfig(t, name, "c", parts)
	cfgC.WarmTimeout = time.Minute
	cfgC.Callbacks = tl.callbacks("c", nil)
	c3 := join(t, c.NewClient(t), cfgC)
	tl.wait(t, fmt.Sprintf("c acquired %d prepared=true", p))
	waitStable(t, 30*time.Second, a, b, c3)
	require.ErrorIs(t, tl.cause("b", p), ErrMoveCalledOff)
	require.Equal(t, -1, tl.index(fmt.Sprintf("b acquired %d prepared=false", p)))
	require.Equal(t, -1, tl.index(fmt.Sprintf("b acquired %d prepared=true", p)))
	require.Less(t, tl.index(fmt.Sprintf("a released %d moved", p)), tl.index(fmt.Sprintf("c acquired %d prepared=true", p)))
}

// TestPrepareOnClose shows that a graceful leave prepares every
// successor in parallel: the preparations of all the leaving node's
// partitions run at once (each waits for all the others to have started),
// and the leave completes with every partition acquired prepared.
func TestPrepareOnClose(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm-close", 16
	tl := newTimeline()
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = time.Minute
	cfgA.Callbacks = tl.callbacks("a", nil)
	a := join(t, c.NewClient(t), cfgA)
	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Minute
	var closing sync.WaitGroup
	var leaving atomic.Bool
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		if !leaving.Load() {
			return nil
		}
		closing.Done()
		closing.Wait() // every preparation has started
		return nil
	})
	waitStable(t, 30*time.Second, a)
	b := join(t, c.NewClient(t), cfgB)
	waitStable(t, 30*time.Second, a, b)
	owned := a.Owned()
	require.NotEmpty(t, owned)
	closing.Add(len(owned))
	leaving.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.Close(ctx))
	for _, p := range owned {
		tl.wait(t, fmt.Sprintf("b acquired %d prepared=true", p))
	}
}

func mustRing(t *testing.T, ids []string, cfg ring.Config) *ring.Ring {
	t.Helper()
	r, err := ring.New(ids, cfg)
	require.NoError(t, err)
	return r
}

// TestNoPrepareNoWait shows that a successor without OnPrepare costs a
// planned move nothing: it says in its member value that it does not
// prepare, so the holder, whose warm timeout is long, hands off at once,
// and no readiness key is ever written.
func TestNoPrepareNoWait(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "noprep", 16
	cli := c.NewClient(t)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	ready := cli.Watch(wctx, keys.New(name).ReadyPrefix(), clientv3.WithPrefix())

	tl := newTimeline()
	cfgA := testConfig(t, name, "a", parts)
	cfgA.Callbacks = tl.callbacks("a", nil) // a prepares, b does not
	cfgA.WarmTimeout = time.Hour
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)
	p := movingPartition(t, parts, []string{"a"}, "a", "b")

	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Hour
	cfgB.Callbacks = Callbacks{OnAcquired: func(e Event) {
		tl.add("b acquired %d prepared=%v", e.Partition, !e.Prepared.IsZero())
	}}
	b := join(t, c.NewClient(t), cfgB)
	tl.wait(t, fmt.Sprintf("b acquired %d prepared=false", p)) // long before the hour
	waitStable(t, 30*time.Second, a, b)

	// A put of our own after the move: the watch has delivered everything
	// before it, so no readiness key was written if this is the first event.
	marker := keys.New(name).ReadyPrefix() + "marker"
	_, err := cli.Put(context.Background(), marker, "x")
	require.NoError(t, err)
	for resp := range ready {
		require.NoError(t, resp.Err())
		for _, ev := range resp.Events {
			require.Equal(t, marker, string(ev.Kv.Key), "a readiness key was written for a successor that does not prepare")
		}
		if len(resp.Events) > 0 {
			break
		}
	}
}
