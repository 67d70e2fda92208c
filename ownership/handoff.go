package ownership

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
)

// States of a tenure, as Hold sees them.
const (
	tenureAcquiring int32 = iota // claim held, fencers not yet advanced
	tenureServing                // admitting work
	tenureEnded                  // releasing or lost: admitting no work
)

// tenure is one tenure of this node over one partition: from the creation of
// its claim (the epoch) to its end. Hold and Held.Release use the atomic
// fields from any goroutine; everything else belongs to the event loop.
//
// Admission and drain are race-free without a lock. Hold increments inflight
// and then re-reads state; the drainer stores state and then reads inflight.
// Go's atomics are sequentially consistent, so at least one of them sees the
// other: either Hold sees tenureEnded and backs out, or the drainer sees the
// work and waits for it.
type tenure struct {
	p      int
	token  fence.Token
	ctx    context.Context // cancelled when the tenure ends; carries token
	cancel context.CancelCauseFunc

	state    atomic.Int32
	inflight atomic.Int64
	drained  chan struct{} // closed once ended and inflight is zero
	closed   atomic.Bool   // drained is closed

	reason   atomic.Int32 // Reason, set when the tenure ends
	acquired atomic.Bool  // OnAcquired was queued
	released atomic.Bool  // OnReleased was queued (or will never be)
}

func newTenure(parent context.Context, p int, epoch int64) *tenure {
	t := &tenure{
		p:       p,
		token:   fence.Token{Scope: fence.PartitionScope(p), Epoch: epoch},
		drained: make(chan struct{}),
	}
	ctx, cancel := context.WithCancelCause(parent)
	t.ctx, t.cancel = fence.NewContext(ctx, t.token), cancel
	return t
}

// enter admits one unit of work. It reports false if the tenure is not
// serving.
func (t *tenure) enter() bool {
	if t.state.Load() != tenureServing {
		return false
	}
	t.inflight.Add(1)
	if t.state.Load() != tenureServing || t.ctx.Err() != nil {
		t.exit()
		return false
	}
	return true
}

// exit ends one unit of work admitted by enter.
func (t *tenure) exit() {
	if t.inflight.Add(-1) == 0 && t.state.Load() == tenureEnded {
		t.signalDrained()
	}
}

func (t *tenure) signalDrained() {
	if t.closed.CompareAndSwap(false, true) {
		close(t.drained)
	}
}

// end stops admitting work, records r (unless a reason was recorded before)
// and cancels the tenure's context with r's cause. Work already admitted
// keeps running until it calls Release; drained is closed when it has.
func (t *tenure) end(r Reason) {
	t.reason.CompareAndSwap(0, int32(r))
	t.state.Store(tenureEnded)
	t.cancel(Reason(t.reason.Load()).cause())
	if t.inflight.Load() == 0 {
		t.signalDrained()
	}
}

// endReason returns the reason recorded by end.
func (t *tenure) endReason() Reason { return Reason(t.reason.Load()) }

// Held is work admitted by Hold: it runs under Token, and Context is the
// partition's context, cancelled (with context.Cause ErrMoved, ErrLost or
// ErrClosed) when the tenure ends. The work counts as in flight until
// Release is called; a handoff waits for it, up to Config.DrainTimeout, before
// the partition's claim is deleted.
//
// Held is a small value; copies share the same admission. Release must be
// called once the work is done, from any goroutine; calling it more than
// once, on any copy, has no further effect.
type Held struct {
	// Partition is the partition of the work.
	Partition int
	// Token is the tenure's fencing token: present it with every write.
	Token fence.Token
	// Context is the partition's context. It carries Token
	// (fence.FromContext).
	Context context.Context

	h *hold
}

type hold struct {
	t    *tenure
	done atomic.Bool
}

// Release ends the work's admission. It is safe to call on the zero Held.
func (h Held) Release() {
	if h.h != nil && h.h.done.CompareAndSwap(false, true) {
		h.h.t.exit()
	}
}

// drain runs on its own goroutine for tenures that ended by handoff: for
// each, it waits for the in-flight work, queues OnReleased and waits for it
// to return, all within the drain timeout, then tells the loop to delete the
// claim. Tenures without work in flight go together, so that a large
// handoff costs a few messages and transactions; each busy tenure gets its
// own goroutine, so one long piece of work delays no other partition.
func (n *Node) drain(gen *generation, ts []*tenure) {
	deadline := n.clock.Now().Add(n.cfg.DrainTimeout)
	var ready []*tenure
	for _, t := range ts {
		select {
		case <-t.drained:
			ready = append(ready, t)
		default:
			n.spawn(func() { n.drainOne(gen, t, deadline) })
		}
	}
	if len(ready) == 0 {
		return
	}
	timer := n.clock.NewTimer(deadline.Sub(n.clock.Now()))
	defer timer.Stop()
	var last <-chan struct{}
	for _, t := range ready {
		if ack := n.fireReleased(t); ack != nil {
			last = ack // callbacks run in order: the last one returns last
		}
	}
	if last != nil {
		select {
		case <-last:
		case <-timer.Chan():
			n.log.Warn("drain timeout: OnReleased still running", "partitions", len(ready))
		case <-gen.ctx.Done():
			return
		}
	}
	n.post(gen, func(l *loop) {
		for _, t := range ready {
			l.drained(t)
		}
	})
}

// drainOne is drain for one tenure with work in flight.
func (n *Node) drainOne(gen *generation, t *tenure, deadline time.Time) {
	timer := n.clock.NewTimer(deadline.Sub(n.clock.Now()))
	defer timer.Stop()
	expired := false
	select {
	case <-t.drained:
	case <-timer.Chan():
		expired = true
		n.log.Warn("drain timeout: deleting the claim with work still in flight",
			"partition", t.p, "epoch", t.token.Epoch, "in_flight", t.inflight.Load(), "timeout", n.cfg.DrainTimeout)
	case <-gen.ctx.Done():
		return
	}
	if ack := n.fireReleased(t); ack != nil && !expired {
		select {
		case <-ack:
		case <-timer.Chan():
			n.log.Warn("drain timeout: OnReleased still running", "partition", t.p, "epoch", t.token.Epoch)
		case <-gen.ctx.Done():
			return
		}
	}
	n.post(gen, func(l *loop) { l.drained(t) })
}

// fireAcquired queues OnAcquired for t.
func (n *Node) fireAcquired(t *tenure) {
	if f := n.cfg.Callbacks.OnAcquired; f != nil {
		n.disp.enqueue(func() { f(t.ctx, t.p, t.token) })
	}
}

// fireReleased queues OnReleased for t once, if t was served, and
// returns a channel closed when it has returned; nil if nothing was queued.
func (n *Node) fireReleased(t *tenure) <-chan struct{} {
	if !t.acquired.Load() || !t.released.CompareAndSwap(false, true) {
		return nil
	}
	f := n.cfg.Callbacks.OnReleased
	if f == nil {
		return nil
	}
	ack := make(chan struct{})
	n.disp.enqueue(func() {
		defer close(ack)
		f(t.p, t.token, t.endReason())
	})
	return ack
}
