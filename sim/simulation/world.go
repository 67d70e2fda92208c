package simulation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/internal/clock"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// world is one run's shared state: virtual time, etcd, the recorder and
// the nodes with their fault state.
type world struct {
	cfg   Config
	sched Schedule
	fc    *clockwork.FakeClock
	start time.Time
	rec   check.Recorder
	srv   *memetcd.Server
	nodes []*simNode
	// ctx ends when the workload stops; end when the run ends, which heals
	// any fault still in force (heals waits for them).
	ctx   context.Context
	end   context.Context
	heals sync.WaitGroup
	// outsider, if not nil, starts a RaiseFloor fault; nil: the strategy
	// has no floors to raise.
	outsider func(context.Context, Fault)
	// reshape, if not nil, queues a Resize or Migrate.
	reshape func(Fault)
	// successorKill, if not nil, arms a KillSuccessor.
	successorKill func(Fault)

	mu       sync.Mutex
	healedAt time.Duration // the last fault's actual end
	pauses   int           // process pauses that happened
	hangs    int           // release callbacks that hung
}

func (w *world) now() time.Duration { return w.fc.Now().Sub(w.start) }

// healed notes that a fault ended at at.
func (w *world) healed(at time.Duration) {
	w.mu.Lock()
	w.healedAt = max(w.healedAt, at)
	w.mu.Unlock()
}

// simNode is one process of the fleet: its etcd client, its clock and its
// pending faults. The strategy keeps its own state beside it.
type simNode struct {
	w       *world
	idx     int
	id      string
	cli     *memetcd.Client
	clock   clockwork.Clock
	crashed atomic.Bool

	mu     sync.Mutex
	cuts   int // partitions in force (a crash holds one forever)
	pauses []Fault
	hangs  []Fault
	lose   int // responses the unfenced store loses
	locks  map[string]chan struct{}
}

// cut partitions the node's etcd client until the matching uncut.
func (n *simNode) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cuts++
	if n.cuts == 1 {
		n.w.srv.Partition(n.cli.ID())
	}
}

func (n *simNode) uncut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cuts--
	if n.cuts == 0 {
		n.w.srv.Heal(n.cli.ID())
	}
}

// takeFault pops the first pending fault of q that is due at now; faults
// not taken within a TTL of their time lapse.
func (n *simNode) takeFault(q *[]Fault, now time.Duration) (Fault, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(*q) > 0 {
		f := (*q)[0]
		if f.At > now {
			return Fault{}, false
		}
		*q = (*q)[1:]
		if now-f.At <= n.w.cfg.TTL {
			return f, true
		}
	}
	return Fault{}, false
}

// maybePause runs a due Pause fault: the process stalls, its etcd client
// cut off, for the fault's duration, then resumes.
func (n *simNode) maybePause(ctx context.Context, cutEtcd bool) {
	f, ok := n.takeFault(&n.pauses, n.w.now())
	if !ok {
		return
	}
	if cutEtcd {
		n.cut()
	}
	clock.Sleep(ctx, n.w.fc, f.Dur)
	if cutEtcd {
		n.uncut()
	}
	n.w.healed(n.w.now())
	n.w.mu.Lock()
	n.w.pauses++
	n.w.mu.Unlock()
}

// maybeHang runs a due HangRelease fault in a release callback.
func (n *simNode) maybeHang() {
	f, ok := n.takeFault(&n.hangs, n.w.now())
	if !ok {
		return
	}
	n.w.mu.Lock()
	n.w.hangs++
	n.w.mu.Unlock()
	clock.Sleep(n.w.ctx, n.w.fc, f.Dur)
	n.w.healed(n.w.now())
}

// loseNext reports whether the unfenced store loses this write's response.
func (n *simNode) loseNext() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lose > 0 {
		n.lose--
		return true
	}
	return false
}

// lockKey serializes the node's work on one key (an owner is the single
// writer of its keys; its own workers take turns).
func (n *simNode) lockKey(ctx context.Context, key string) (func(), error) {
	n.mu.Lock()
	if n.locks == nil {
		n.locks = make(map[string]chan struct{})
	}
	ch := n.locks[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		n.locks[key] = ch
	}
	n.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// injector applies the schedule's node-independent parts on virtual time.
func (w *world) inject(ctx context.Context, admin *memetcd.Client) {
	for _, f := range w.sched.Faults {
		if !clock.Sleep(ctx, w.fc, f.At-w.now()) {
			return
		}
		n := w.nodes[f.Node]
		switch f.Kind {
		case Pause:
			n.mu.Lock()
			n.pauses = append(n.pauses, f)
			n.mu.Unlock()
		case HangRelease:
			n.mu.Lock()
			n.hangs = append(n.hangs, f)
			n.mu.Unlock()
		case Crash:
			n.crashed.Store(true)
			n.cut()
			w.healed(w.now())
		case Partition:
			n.cut()
			w.heals.Go(func() {
				clock.Sleep(w.end, w.fc, f.Dur)
				n.uncut()
				w.healed(w.now())
			})
		case Latency:
			w.srv.SetLatency(n.cli.ID(), f.Latency)
			w.heals.Go(func() {
				clock.Sleep(w.end, w.fc, f.Dur)
				w.srv.SetLatency(n.cli.ID(), 0)
				w.healed(w.now())
			})
		case LoseResponses:
			w.srv.LoseResponses(n.cli.ID(), f.N)
			n.mu.Lock()
			n.lose += f.N
			n.mu.Unlock()
		case LeaderChange:
			w.srv.LoseLeader()
			w.heals.Go(func() {
				clock.Sleep(w.end, w.fc, f.Dur)
				w.srv.LeaderChange()
				w.healed(w.now())
			})
		case DropWatches:
			w.srv.DropWatches(n.cli.ID())
		case KillSuccessor:
			if w.successorKill != nil {
				w.successorKill(f)
			}
		case Resize, Migrate:
			if w.reshape != nil {
				w.reshape(f)
			}
		case RaiseFloor:
			if w.outsider != nil {
				w.outsider(context.WithoutCancel(ctx), f)
			}
		case Compact:
			cctx, cancel := context.WithCancel(ctx)
			_, _ = admin.Compact(cctx, w.srv.Revision())
			cancel()
		}
	}
}

// liveNode picks a node that has not crashed.
func (w *world) liveNode(rng *rand.Rand) *simNode {
	for range 4 * len(w.nodes) {
		n := w.nodes[rng.IntN(len(w.nodes))]
		if !n.crashed.Load() {
			return n
		}
	}
	return nil
}

func (w *world) nodeByID(id string) *simNode {
	for _, n := range w.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func nodeID(i int) string { return fmt.Sprintf("n%d", i+1) }

func keyName(i int) string { return fmt.Sprintf("k%02d", i) }
