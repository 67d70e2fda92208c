package ownership

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// movingPartition returns a partition that from owns among members and that
// moves to to when to joins.
func movingPartition(t *testing.T, parts int, members []string, from, to string) int {
	t.Helper()
	cfg := ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor}
	before, err := ring.New(members, cfg)
	require.NoError(t, err)
	after, err := ring.New(append(slices.Clone(members), to), cfg)
	require.NoError(t, err)
	for p := range parts {
		a, _ := before.Owner(p)
		b, _ := after.Owner(p)
		if a == from && b == to {
			return p
		}
	}
	t.Fatalf("no partition moves from %s to %s", from, to)
	return -1
}

// servesAll waits until n serves exactly want.
func servesAll(t *testing.T, n *Node, want []int) {
	t.Helper()
	require.NoError(t, waitFor(30*time.Second, func() error {
		if got := n.Owned(); !slices.Equal(got, want) {
			return fmt.Errorf("%s serves %v, want %v", n.ID(), got, want)
		}
		return nil
	}, n))
}

// TestDrainWaitsForInFlightWork shows that work in flight on a moving
// partition finishes before the claim is deleted, and that new work is
// refused with an error naming the next owner.
func TestDrainWaitsForInFlightWork(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts = "drain", 64
	cfgA := testConfig(t, name, "a", parts)
	cfgA.DrainTimeout = time.Minute // the test releases the work itself
	a, evA, droppedA := joinWithEvents(t, c.NewClient(t), cfgA, 8*parts)
	b := join(t, c.NewClient(t), testConfig(t, name, "b", parts))
	waitStable(t, 30*time.Second, a, b)

	p := movingPartition(t, parts, []string{"a", "b"}, "a", "c")
	held, err := a.HoldPartition(p)
	require.NoError(t, err)
	oldEpoch := held.Token.Epoch

	c3 := join(t, c.NewClient(t), testConfig(t, name, "c", parts))
	// c serves everything it gains except p, whose work is still running.
	ring, err := ring.New([]string{"a", "b", "c"}, cfgA.Ring)
	require.NoError(t, err)
	want := slices.DeleteFunc(ring.Owned("c"), func(q int) bool { return q == p })
	servesAll(t, c3, want)

	// The work's context is still live: a planned move lets admitted work
	// finish before it cancels anything.
	require.NoError(t, held.Context.Err())

	// New work for p is refused, naming the next owner.
	_, err = a.HoldPartition(p)
	require.ErrorIs(t, err, ErrReleasing)
	require.ErrorIs(t, err, ErrNotOwner)
	var wo *WrongOwnerError
	require.ErrorAs(t, err, &wo)
	require.Equal(t, WrongOwnerError{Route: fleet.Route{Partition: p, Owner: "c", Addr: "c.test:7000", RingVersion: a.Ring().Version()}, Releasing: true}, *wo)

	// The claim is still a's, and c waits for it.
	cl := etcdClaims(t, c.NewClient(t), name)[p]
	require.Equal(t, fleettest.Claim{Owner: "a", Epoch: oldEpoch, Lease: cl.Lease, Since: cl.Since}, cl)
	r := c3.LookupPartition(p)
	require.Equal(t, "a", r.Owner)
	require.Equal(t, oldEpoch, r.Epoch)
	require.False(t, r.Local)
	_, err = c3.HoldPartition(p)
	require.ErrorIs(t, err, ErrNotOwner)
	require.NotErrorIs(t, err, ErrReleasing)

	// OnReleased(p) has not been called: it waits for the drain.
	for drained := false; !drained; {
		select {
		case e := <-evA:
			require.False(t, e.Kind == EventReleased && e.Partition == p, "OnReleased before the work finished: %+v", e)
		default:
			drained = true
		}
	}

	// Finishing the work completes the handoff; only then is the tenure's
	// context cancelled.
	require.NoError(t, held.Context.Err())
	held.Release()
	<-held.Context.Done()
	require.ErrorIs(t, context.Cause(held.Context), ErrMoved)
	servesAll(t, c3, ring.Owned("c"))
	r = c3.LookupPartition(p)
	require.Greater(t, r.Epoch, oldEpoch)
	require.True(t, r.Local)
	h, err := c3.HoldPartition(p)
	require.NoError(t, err)
	require.Equal(t, fence.Token{Scope: fence.PartitionScope(p), Epoch: r.Epoch}, h.Token)
	h.Release()
	for {
		e := <-evA
		if e.Kind == EventReleased && e.Partition == p {
			require.Equal(t, ErrMoved, e.Reason)
			require.Equal(t, oldEpoch, e.Token.Epoch)
			break
		}
	}
	require.Zero(t, droppedA())
	waitStable(t, 30*time.Second, a, b, c3)
}

// TestDrainTimeout shows that work that does not finish within the drain
// timeout does not hold the partition hostage: its context stays live for
// the drain timeout, is then cancelled (ErrMoved), and the handoff goes on
// with a warning that counts the work still in flight.
func TestDrainTimeout(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts = "drain-timeout", 32
	const timeout = 500 * time.Millisecond
	cfgA := testConfig(t, name, "a", parts)
	cfgA.DrainTimeout = timeout
	var logs testsupport.Buffer
	cfgA.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	a := join(t, c.NewClient(t), cfgA)
	waitStable(t, 30*time.Second, a)
	p := movingPartition(t, parts, []string{"a"}, "a", "b")
	held, err := a.HoldPartition(p)
	require.NoError(t, err)
	defer held.Release() // never, during the handoff

	b := join(t, c.NewClient(t), testConfig(t, name, "b", parts))
	// a stops admitting work for p, and the work's context stays live.
	require.NoError(t, waitFor(30*time.Second, func() error {
		h, err := a.HoldPartition(p)
		h.Release() // admitted while a still served p: not the work under test
		if !errors.Is(err, ErrReleasing) {
			return fmt.Errorf("hold: %v", err)
		}
		return nil
	}, a))
	stopped := time.Now()
	require.NoError(t, held.Context.Err())
	<-held.Context.Done()
	waited := time.Since(stopped)
	require.ErrorIs(t, context.Cause(held.Context), ErrMoved)
	require.Greater(t, waited, timeout/2, "cancelled before the drain timeout")
	waitStable(t, 30*time.Second, a, b)
	require.Greater(t, b.LookupPartition(p).Epoch, held.Token.Epoch)
	require.Contains(t, logs.String(), "drain timeout")
	require.Contains(t, logs.String(), "in_flight=1")
}

// TestCloseDrainsInFlightWork: a graceful Close with 20 pieces of work in
// flight on its partitions cancels none of their contexts before they are
// released, keeps each partition's claim until its last work is released,
// and only then cancels the context (ErrClosed) and hands the partition
// off.
func TestCloseDrainsInFlightWork(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts, inFlight = "close-drain", 32, 20
	a := join(t, c.NewClient(t), testConfig(t, name, "a", parts))
	cfgB := testConfig(t, name, "b", parts)
	cfgB.DrainTimeout = time.Minute // the test releases the work itself
	var releasedEarly atomic.Int64
	remaining := make([]atomic.Int64, parts)
	cfgB.Callbacks.OnReleased = func(e Event) {
		if remaining[e.Partition].Load() != 0 {
			releasedEarly.Add(1)
		}
	}
	b := join(t, c.NewClient(t), cfgB)
	waitStable(t, 30*time.Second, a, b)

	owned := b.Owned()
	require.NotEmpty(t, owned)
	holds := make([]Held, inFlight)
	for i := range holds {
		h, err := b.HoldPartition(owned[i%len(owned)])
		require.NoError(t, err)
		holds[i] = h
		remaining[h.Partition].Add(1)
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		closed <- b.Close(ctx)
	}()
	// b admits no more work on the partitions with work in flight.
	require.NoError(t, waitFor(30*time.Second, func() error {
		for _, h := range holds {
			extra, err := b.HoldPartition(h.Partition)
			extra.Release()
			var wo *WrongOwnerError
			if !errors.As(err, &wo) || !wo.Releasing || wo.Owner != "a" {
				return fmt.Errorf("partition %d: hold: %v", h.Partition, err)
			}
		}
		return nil
	}, b))

	obs := c.NewClient(t)
	for i, h := range holds {
		require.NoError(t, h.Context.Err(), "work %d cancelled before its Release", i)
		claims := etcdClaims(t, obs, name)
		for p := range parts {
			if remaining[p].Load() > 0 {
				require.Equal(t, "b", claims[p].Owner, "partition %d: claim gone with work in flight", p)
			}
		}
		remaining[h.Partition].Add(-1)
		h.Release()
	}
	require.NoError(t, <-closed)
	for _, h := range holds {
		require.ErrorIs(t, context.Cause(h.Context), ErrClosed)
	}
	require.Zero(t, releasedEarly.Load(), "OnReleased with work in flight")
	waitStable(t, 30*time.Second, a)
}

// TestSessionLoss cuts a node off from etcd: every partition is lost at
// once, the others take over when its lease expires, and when the network
// heals it rejoins with new epochs.
func TestSessionLoss(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts = "loss", 32
	cliA, fp := c.NewFaultyClient(t)
	a, evA, _ := joinWithEvents(t, cliA, testConfig(t, name, "a", parts), 8*parts)
	b := join(t, c.NewClient(t), testConfig(t, name, "b", parts))
	waitStable(t, 30*time.Second, a, b)

	owned := a.Owned()
	require.NotEmpty(t, owned)
	epochs := map[int]int64{}
	held := map[int]Held{}
	for _, p := range owned {
		epochs[p] = a.LookupPartition(p).Epoch
		h, err := a.HoldPartition(p)
		require.NoError(t, err)
		held[p] = h
	}

	fp.Blackhole()
	// All of a's contexts are cancelled with ErrLost, work in flight or
	// not, and OnReleased(lost) reports each.
	<-held[owned[0]].Context.Done()
	requireSessionLost(t, a) // at once, before the event loop has caught up
	for _, h := range held {
		<-h.Context.Done()
		require.ErrorIs(t, context.Cause(h.Context), ErrLost)
		h.Release()
	}
	lost := map[int]bool{}
	for len(lost) < len(owned) {
		e := <-evA
		if e.Kind == EventReleased && e.Token.Epoch == epochs[e.Partition] {
			require.Equal(t, ErrLost, e.Reason, "%+v", e)
			lost[e.Partition] = true
		}
	}
	// Until it has rejoined, a says that its session is lost, and never
	// names itself as an owner.
	requireSessionLost(t, a)

	// b takes over once a's lease expires in etcd.
	servesAll(t, b, seq(parts))
	requireSessionLost(t, a)

	fp.Heal()
	waitStable(t, 30*time.Second, a, b)
	for _, p := range a.Owned() {
		if e, ok := epochs[p]; ok {
			require.Greater(t, a.LookupPartition(p).Epoch, e)
		}
	}
}

// requireSessionLost checks the answers of n, whose session ended: Hold
// refuses every partition with a *WrongOwnerError that says so
// (SessionLost, errors.Is ErrLost) and never names n, and Lookup never
// reports n as the owner of a partition, nor any partition Local.
func requireSessionLost(t *testing.T, n *Node) {
	t.Helper()
	for p := range n.Ring().Partitions() {
		_, err := n.HoldPartition(p)
		require.ErrorIs(t, err, ErrNotOwner)
		require.ErrorIs(t, err, ErrLost)
		var wo *WrongOwnerError
		require.ErrorAs(t, err, &wo)
		require.True(t, wo.SessionLost, "partition %d: %v", p, err)
		require.False(t, wo.Acquiring || wo.Releasing, "partition %d: %v", p, err)
		require.NotEqual(t, n.ID(), wo.Owner, "partition %d: %v", p, err)
		require.Contains(t, err.Error(), "session lost")
		r := n.LookupPartition(p)
		require.False(t, r.Local, "partition %d: %+v", p, r)
		require.NotEqual(t, n.ID(), r.Owner, "partition %d: %+v", p, r)
	}
	require.Empty(t, n.Owned())
}

// TestClaimDeletedExternally shows that a node whose claim disappears (an
// operator deleted it) ends that tenure as lost and claims again.
func TestClaimDeletedExternally(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts = "external", 8
	a, ev, _ := joinWithEvents(t, c.NewClient(t), testConfig(t, name, "a", parts), 8*parts)
	waitStable(t, 30*time.Second, a)
	for range parts {
		require.Equal(t, EventAcquired, (<-ev).Kind)
	}
	old := a.LookupPartition(3).Epoch
	h, err := a.HoldPartition(3)
	require.NoError(t, err)
	defer h.Release()

	op := c.NewClient(t)
	_, err = op.Delete(context.Background(), keys.New(name).Claim(3))
	require.NoError(t, err)
	<-h.Context.Done()
	require.ErrorIs(t, context.Cause(h.Context), ErrLost)
	e := <-ev
	require.Equal(t, Event{Kind: EventReleased, Partition: 3, Partitions: parts, Token: h.Token, Reason: ErrLost}, e)
	e = <-ev
	require.Equal(t, EventAcquired, e.Kind)
	require.Equal(t, 3, e.Partition)
	require.Greater(t, e.Token.Epoch, old)
	waitStable(t, 30*time.Second, a)

	// Deleting the member key makes the node rejoin with a new session.
	_, err = op.Delete(context.Background(), keys.New(name).Member("a"))
	require.NoError(t, err)
	for range parts {
		e := <-ev
		require.Equal(t, EventReleased, e.Kind, "%+v", e)
		require.Equal(t, ErrLost, e.Reason)
	}
	waitStable(t, 30*time.Second, a)
	require.Equal(t, []string{"a"}, etcdMembers(t, op, name))
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestChanCallbacksDropPolicy checks the channel adapter: it never blocks,
// drops the newest event when full and counts drops.
func TestChanCallbacksDropPolicy(t *testing.T) {
	cb, ch, dropped := ChanCallbacks(2)
	tok := fence.Token{Scope: "p/1", Epoch: 5}
	cb.OnAcquired(Event{Kind: EventAcquired, Partition: 1, Token: tok, Context: context.Background()})
	cb.OnReleased(Event{Kind: EventReleased, Partition: 1, Token: tok, Reason: ErrMoved})
	cb.OnAcquired(Event{Kind: EventAcquired, Partition: 1, Token: fence.Token{Scope: "p/1", Epoch: 9}, Context: context.Background()}) // dropped
	require.Equal(t, uint64(1), dropped())
	require.Equal(t, EventAcquired, (<-ch).Kind)
	e := <-ch
	require.Equal(t, Event{Kind: EventReleased, Partition: 1, Token: tok, Reason: ErrMoved}, e)
	select {
	case e := <-ch:
		t.Fatalf("unexpected %+v", e)
	default:
	}
	_, ch0, _ := ChanCallbacks(-3) // clamped to 1, no panic
	require.Equal(t, 1, cap(ch0))

	require.Equal(t, "moved", reasonMoved.String())
	require.Equal(t, "lost", reasonLost.String())
	require.Equal(t, "closed", reasonClosed.String())
	require.Equal(t, "reason(9)", reason(9).String())
	require.Equal(t, "acquired", EventAcquired.String())
	require.Equal(t, "released", EventReleased.String())
}

// TestDispatcherOrder checks that callbacks run one at a time, in order.
func TestDispatcherOrder(t *testing.T) {
	d := newDispatcher()
	go d.run()
	var got []int
	running := false
	for i := range 1000 {
		d.enqueue(func() {
			if running {
				panic("concurrent callbacks")
			}
			running = true
			got = append(got, i)
			running = false
		})
	}
	d.close()
	<-d.done
	require.Equal(t, seq(1000), got)
}

func TestWrongOwnerErrorMessages(t *testing.T) {
	tests := []struct {
		err  *WrongOwnerError
		want string
	}{
		{&WrongOwnerError{Route: fleet.Route{Partition: 3}}, "ownership: not the owner: partition 3, owner unknown"},
		{&WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7}}, `ownership: not the owner: partition 3, owner "b" at h:1 epoch 7`},
		{&WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "c"}, Releasing: true}, `ownership: partition is being released: partition 3, next owner "c"`},
		{&WrongOwnerError{Route: fleet.Route{Partition: 3}, SessionLost: true}, `ownership: session lost, rejoining: partition 3, owner unknown`},
		{&WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7}, SessionLost: true}, `ownership: session lost, rejoining: partition 3, owner "b" at h:1 epoch 7`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.err.Error())
		require.True(t, errors.Is(tt.err, ErrNotOwner))
		require.Equal(t, tt.err.Releasing, errors.Is(tt.err, ErrReleasing))
		require.Equal(t, tt.err.SessionLost, errors.Is(tt.err, ErrLost))
	}
}

// TestHoldDrainStress runs work on every partition from many goroutines
// while partitions move (a join, then a graceful leave), and checks that no
// admitted work is still running when OnReleased reports the end of its
// tenure: the drain waited for all of it.
func TestHoldDrainStress(t *testing.T) {
	c := cluster.New(t, 3)
	const name, parts, workers = "stress", 64, 8
	type tracked struct {
		n      *Node
		active [parts]atomic.Int64
		bad    atomic.Int64
		served atomic.Int64
	}
	var all []*tracked
	start := func(id string) *tracked {
		tr := &tracked{}
		cfg := testConfig(t, name, id, parts)
		cfg.DrainTimeout = time.Minute
		cfg.Callbacks.OnReleased = func(e Event) {
			if tr.active[e.Partition].Load() != 0 {
				tr.bad.Add(1)
			}
		}
		tr.n = join(t, c.NewClient(t), cfg)
		all = append(all, tr)
		return tr
	}
	a, b := start("a"), start("b")
	waitStable(t, 30*time.Second, a.n, b.n)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, tr := range []*tracked{a, b} {
		for w := range workers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					h, err := tr.n.Hold(fmt.Sprintf("k%d-%d", w, i%512))
					if err != nil {
						if !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrClosed) {
							tr.bad.Add(1)
						}
						runtime.Gosched()
						continue
					}
					tr.active[h.Partition].Add(1)
					tr.served.Add(1)
					runtime.Gosched()
					if h.Context.Err() == nil {
						runtime.Gosched()
					}
					tr.active[h.Partition].Add(-1)
					h.Release()
				}
			})
		}
	}
	c3 := start("c")
	waitStable(t, 30*time.Second, a.n, b.n, c3.n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.n.Close(ctx))
	waitStable(t, 30*time.Second, a.n, c3.n)
	close(stop)
	wg.Wait()
	for _, tr := range all {
		require.Zero(t, tr.bad.Load(), "%s: OnReleased while work was running", tr.n.ID())
	}
	require.NotZero(t, a.served.Load())
	require.NotZero(t, b.served.Load())
}
