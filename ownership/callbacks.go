package ownership

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
)

// reason says why a tenure ended. Users are told it as its cause, the
// error the partition's context is cancelled with (ErrMoved, ErrLost or
// ErrClosed: Event.Reason, Ended); metrics and logs as its label (String).
type reason int

const (
	// reasonMoved: the ring moved the partition to another node and this
	// node handed it off (drained, then deleted its claim). ErrMoved.
	reasonMoved reason = iota + 1
	// reasonLost: the tenure ended without a handoff. ErrLost.
	reasonLost
	// reasonClosed: the Node was closed and handed the partition off.
	// ErrClosed.
	reasonClosed
)

// String returns "moved", "lost" or "closed", the label of r.
func (r reason) String() string {
	switch r {
	case reasonMoved:
		return "moved"
	case reasonLost:
		return "lost"
	case reasonClosed:
		return "closed"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// causes holds the context cause of a tenure that ended for each reason,
// in the order Ended tries them.
var causes = [...]struct {
	r   reason
	err error
}{{reasonLost, ErrLost}, {reasonMoved, ErrMoved}, {reasonClosed, ErrClosed}}

// cause returns the context cause of a tenure that ended for r.
func (r reason) cause() error {
	for _, c := range causes {
		if c.r == r {
			return c.err
		}
	}
	return ErrLost
}

// reasonOf returns the reason whose cause err is or wraps.
func reasonOf(err error) (reason, bool) {
	for _, c := range causes {
		if errors.Is(err, c.err) {
			return c.r, true
		}
	}
	return 0, false
}

// Ended is tenure's one answer to "did the tenure end, so that the work
// must be routed again?". It reports whether err, the error of work
// admitted by Hold and run under ctx (the partition's context, or one
// derived from it), says that the work's tenure ended, and why, as the
// cause the tenure ended with (ErrMoved, ErrLost or ErrClosed itself,
// unwrapped, so that it compares with ==):
//
//   - err is or wraps ErrLost (a *WrongOwnerError whose SessionLost is
//     set included), ErrMoved or ErrClosed;
//   - err is or wraps fence.ErrStale: a store refused the work's write
//     because a newer tenure wrote there;
//   - err is or wraps context.Canceled or context.DeadlineExceeded while
//     ctx has ended with the end of its tenure as its cause (ErrMoved,
//     ErrLost or ErrClosed).
//
// The cause is ctx's when ctx ended with the end of its tenure, else that
// which err names (ErrMoved for a stale write). Any other error, nil
// included, is no end of a tenure: nil, false. A nil ctx is one that has not
// ended. The work was not done where a stale write was refused; whether
// work cut short did anything is the work's to say: retries carry an
// idempotency key.
func Ended(ctx context.Context, err error) (cause error, ended bool) {
	if err == nil {
		return nil, false
	}
	r, named := reasonOf(err)
	stale := errors.Is(err, fence.ErrStale)
	cut := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if !named && !stale && !cut {
		return nil, false
	}
	if ctx != nil && ctx.Err() != nil {
		if cr, ok := reasonOf(context.Cause(ctx)); ok {
			return cr.cause(), true
		}
	}
	switch {
	case named:
		return r.cause(), true
	case stale:
		return ErrMoved, true
	}
	return nil, false
}

// Callbacks are told when this node's tenures begin and end. A Node calls
// them from one goroutine, in order, never concurrently, and never while
// holding a lock: for every partition, OnAcquired always precedes the
// OnReleased that ends the same tenure, and each tenure gets exactly one of
// each (none at all if it ended before it was served). Nil fields are
// skipped.
//
// Every callback takes one Event, so that what it is told can grow. A
// callback that reports a start (OnAcquired) receives, in Event.Context,
// the context of what began, which ends with it; a callback that reports an
// end (OnReleased) says why, in Event.Reason.
//
// Callbacks run on a queue of their own, so a slow callback does not stall
// the node, but it does delay the callbacks after it and, by up to
// Config.DrainTimeout, the handoffs waiting for their OnReleased, and, by
// up to Config.AcquiredTimeout, the admission of the partitions whose
// OnAcquired waits behind it. Callbacks must not call Close (Close waits
// for the queue to empty); Lookup, Hold and the other methods are fine,
// but OnAcquired must not wait for work on its own partition admitted by
// Hold (router.Router.Do, a routed call): that work is admitted only once
// OnAcquired has returned. The order of the callbacks among the other
// events of a tenure is the package documentation's table.
type Callbacks struct {
	// OnAcquired is called with an EventAcquired when this node has
	// acquired e.Partition under e.Token: after every Fencer has been
	// advanced to e.Token, and before the node admits any work for the
	// partition. Hold admits work, Lookup reports the partition Local and
	// Ready counts it only once OnAcquired has returned (or
	// Config.AcquiredTimeout has passed), so that state it loads is in
	// place before the first call; calls that arrive meanwhile wait (see
	// Config.AcquiredTimeout, which also turns this wait off: OnAcquired
	// then runs once Lookup reports the partition Local, concurrently
	// with the first calls). If the tenure ends while OnAcquired runs,
	// OnReleased follows it. e.Context is the partition's context: it is
	// cancelled when the tenure ends, with context.Cause ErrMoved, ErrLost
	// or ErrClosed, and carries e.Token (fence.FromContext). e.Prepared
	// says whether, and when, this node prepared the partition before it
	// claimed it (see OnPrepare): the new owner then reads what changed
	// since its snapshot, under e.Token, instead of loading everything.
	OnAcquired func(e Event)
	// OnReleased is called with an EventReleased when the tenure under
	// e.Token ended, for e.Reason. For a handoff (ErrMoved, ErrClosed) it
	// is called once in-flight work has drained (or the
	// drain timed out) and the partition's context has been cancelled,
	// and, unless it takes longer than what remains of the drain timeout,
	// it returns before the claim is deleted (or handed over to the next
	// owner) and the next owner can take over.
	OnReleased func(e Event)
	// OnPrepare is called with an EventPrepare when a planned move makes
	// this node the next owner of e.Partition while e.Holder still serves
	// it (the warm handoff; see Config.WarmTimeout). It loads what the
	// partition needs (a cache, counters, an index) by reads only: this
	// node holds no token for the partition, e.Token is zero and
	// e.Context carries none, and any write must wait for OnAcquired.
	// Returning tells the holder, through etcd, that this node is ready;
	// the holder then drains, releases, and this node claims at a new
	// epoch, and its OnAcquired reports e.Prepared if OnPrepare returned
	// nil. An error, or a return after the warm timeout, makes the move
	// go on cold: correctness never depends on the preparation.
	//
	// Unlike the other callbacks, OnPrepare runs on a goroutine of its own
	// for each partition, concurrently with the other callbacks and with
	// other partitions' OnPrepare, so that a slow preparation delays no
	// other; at most one runs per partition at a time, and OnAcquired
	// reports a partition prepared only after its OnPrepare has returned.
	// e.Context is cancelled when the preparation is over: the claim
	// began (ErrMoveCompleted), the move was called off (ErrMoveCalledOff),
	// the session was lost (ErrLost) or the node closed (ErrClosed). An
	// OnPrepare still running when the claim begins has lost its turn:
	// OnAcquired then reports the partition unprepared, and whatever that
	// OnPrepare still stages must be ignored. OnPrepare must return once
	// e.Context is done: Close waits for it.
	OnPrepare func(e Event) error
}

// EventKind tells an Event's kind.
type EventKind int

const (
	// EventAcquired reports the start of a tenure (OnAcquired).
	EventAcquired EventKind = iota + 1
	// EventReleased reports the end of a tenure (OnReleased).
	EventReleased
	// EventPrepare asks the next owner of a partition to prepare it
	// (OnPrepare).
	EventPrepare
)

// String returns "acquired", "released" or "prepare".
func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventReleased:
		return "released"
	case EventPrepare:
		return "prepare"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a callback is told (see Callbacks), and one callback in
// channel form (see ChanCallbacks).
type Event struct {
	// Kind says whether a tenure started or ended.
	Kind EventKind
	// Partition is the partition concerned.
	Partition int
	// Partitions is the partition count Partition counts by: a key k is
	// in it when ring.PartitionOf(k, Partitions) == Partition. It is the
	// spec's count, except during a resize, where a partition of a group
	// that is done counts by the target count (see "Changing the
	// partition count"). It cannot change during a tenure, whose
	// partition's group changes phase only once its claim is gone; a
	// store that loads a partition by its keys reads this count, not one
	// it remembers. For EventPrepare, the count of the partition the
	// holder serves.
	Partitions int
	// Token is the tenure's fencing token; zero for EventPrepare (the
	// node preparing a partition holds no token for it).
	Token fence.Token
	// Context is the context of what began: the partition's for
	// EventAcquired, cancelled when the tenure ends; the preparation's for
	// EventPrepare, cancelled when it is over. Nil for EventReleased.
	Context context.Context
	// Reason says why the tenure ended (EventReleased only; nil
	// otherwise): the cause the partition's context was cancelled with,
	// itself, so that it compares with ==:
	//
	//   - ErrMoved: the ring moved the partition to another node and this
	//     node handed it off (drained, then deleted its claim);
	//   - ErrLost: the tenure ended without a handoff. The Session ended or
	//     its safe deadline passed, or the claim disappeared from etcd. The
	//     next owner may already be serving the partition;
	//   - ErrClosed: the Node was closed and handed the partition off.
	Reason error
	// Holder is the node that holds the partition while this one
	// prepares it (EventPrepare only).
	Holder string
	// Prepared is when this node's OnPrepare for the partition returned
	// nil, by the node's clock, if the partition was prepared before this
	// tenure's claim; zero if it was not (EventAcquired only).
	Prepared time.Time
}

// ChanCallbacks returns Callbacks that deliver events on a channel with
// buffer slots, the channel, and a function that returns the number of
// events dropped so far.
//
// Drop policy: delivery never blocks the node. When the buffer is full, the
// new event is dropped and counted; events already in the buffer are kept,
// so the channel always shows events in order, possibly with gaps. A
// consumer that must not miss the end of a tenure should also watch the
// Context of its EventAcquired, which is cancelled when the tenure ends
// whether or not the EventReleased got through. buffer below 1 is taken as
// 1. The channel is never closed.
func ChanCallbacks(buffer int) (Callbacks, <-chan Event, func() uint64) {
	ch := make(chan Event, max(buffer, 1))
	var dropped atomic.Uint64
	send := func(e Event) {
		select {
		case ch <- e:
		default:
			dropped.Add(1)
		}
	}
	return Callbacks{OnAcquired: send, OnReleased: send}, ch, dropped.Load
}

// fireAcquired queues OnAcquired for t, a tenure of gen. In the starting
// phase, its return is posted to the event loop, which then admits work
// for t (starting.go).
func (n *Node) fireAcquired(gen *generation, t *tenure) {
	f := n.cfg.Callbacks.OnAcquired
	if f == nil {
		return
	}
	e := Event{Kind: EventAcquired, Partition: t.p, Partitions: t.count, Token: t.token, Context: t.ctx, Prepared: t.prepared}
	if !n.startsFirst() {
		n.disp.enqueue(func() { f(e) })
		return
	}
	n.disp.enqueue(func() {
		f(e)
		t.acquiredReturned.Store(true)
		n.post(gen, acquiredReturned{t: t})
	})
}

// fireReleased counts the end of t, whose tenure was served and has ended,
// queues OnReleased for it, and returns a channel closed when that has
// returned; nil if there is no OnReleased. The event loop calls it once per
// served tenure, as the partition's record leaves serving and draining
// (loop.transition), so that the callback and the release metric tell the
// same reason.
func (n *Node) fireReleased(t *tenure) <-chan struct{} {
	n.report.tenureEnded(t)
	f := n.cfg.Callbacks.OnReleased
	if f == nil {
		return nil
	}
	ack := make(chan struct{})
	e := Event{Kind: EventReleased, Partition: t.p, Partitions: t.count, Token: t.token, Reason: t.reason.cause()}
	n.disp.enqueue(func() {
		defer close(ack)
		f(e)
	})
	return ack
}
