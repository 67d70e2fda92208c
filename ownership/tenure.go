package ownership

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
)

// tenure is one tenure of this node over one partition: from the creation of
// its claim (the epoch) to its end. Its lifecycle is its partition's record
// (record.go): the tenure itself holds only what the work needs (token,
// context), the count of work in flight and, once it has ended, why.
//
// Admission and drain are race-free without a lock. enter increments
// inflight and then re-reads the partition's record; the event loop
// stores a record that is not serving and then reads inflight (stop,
// finish). Go's atomics are sequentially consistent, so at least one of them
// sees the other: either enter sees that the tenure no longer serves and
// backs out, or finish sees the work and the drain waits for it.
type tenure struct {
	p     int
	token fence.Token
	// retire are the scopes of the partitions this tenure's partition
	// replaced in a resize of the partition count, at the revision the
	// change was made (see retireTokens): advanced with token, before
	// the tenure admits work.
	retire []fence.Token
	count  int             // the partition count p counts by (Event.Partitions)
	ctx    context.Context // cancelled when the tenure ends; carries token
	cancel context.CancelCauseFunc
	slot   *slot       // the partition's record
	gen    *generation // the generation (session) the claim is bound to
	reason reason      // why the tenure ended; written once, by the event loop, before ctx is cancelled
	// prepared is when this node's OnPrepare for the partition returned
	// nil before the claim (zero if it did not): OnAcquired's Prepared.
	prepared time.Time
	// acquiredReturned is set once its OnAcquired has returned, when the
	// tenure waits for it in the starting phase (starting.go).
	acquiredReturned atomic.Bool

	inflight    atomic.Int64
	drained     chan struct{} // closed once the tenure ended and inflight is zero
	drainedOnce sync.Once
}

// newTenure returns the tenure over p of the claim created at epoch. Its
// context carries its token and, with a signer, the signer's signature of
// the token (fence.SignatureFromContext), which httpfence.Transport sends
// downstream with it.
func newTenure(gen *generation, s *slot, p int, epoch int64, signer *fence.Signer) *tenure {
	t := &tenure{
		p:       p,
		gen:     gen,
		token:   fence.Token{Scope: fence.PartitionScope(p), Epoch: epoch},
		slot:    s,
		drained: make(chan struct{}),
	}
	var sig fence.Signature
	if signer != nil {
		sig, _ = signer.Sign(t.token) // a valid token: Sign cannot fail
	}
	ctx, cancel := context.WithCancelCause(gen.ctx)
	t.ctx, t.cancel = fence.NewSignedContext(ctx, t.token, sig), cancel
	return t
}

// enter admits one unit of work if rec, the record it was found serving
// in, is still the partition's record. It reports false if not.
func (t *tenure) enter(rec *record) bool {
	t.inflight.Add(1)
	// The session's Err reads the clock: a process resumed after a pause
	// past its safe deadline admits nothing, even before the goroutine that
	// watches the deadline has run and cancelled ctx.
	if t.slot.cur.Load() != rec || t.ctx.Err() != nil || t.gen.sess.Err() != nil {
		t.exit()
		return false
	}
	return true
}

// exit ends one unit of work admitted by enter.
func (t *tenure) exit() {
	if t.inflight.Add(-1) == 0 && !t.slot.serving(t) {
		t.signalDrained()
	}
}

func (t *tenure) signalDrained() { t.drainedOnce.Do(func() { close(t.drained) }) }

// stop is called once the partition's record has left serving for
// draining (see loop.transition): no more work is admitted, and drained is closed
// once the work already admitted has called Release. The context stays
// live.
func (t *tenure) stop() {
	if t.inflight.Load() == 0 {
		t.signalDrained()
	}
}

// finish ends the tenure after its partition's record has left serving
// (see loop.transition): it records r, unless a reason was recorded before, and cancels
// the tenure's context with r's cause. Work still admitted keeps running
// until it calls Release; drained is closed when it has.
func (t *tenure) finish(r reason) {
	if t.reason == 0 {
		t.reason = r
	}
	t.cancel(t.reason.cause())
	if t.inflight.Load() == 0 {
		t.signalDrained()
	}
}

// Held is work admitted by Hold: it runs under Token, and Context is the
// partition's context, cancelled (with context.Cause ErrMoved, ErrLost or
// ErrClosed) when the tenure ends. The work counts as in flight until
// Release is called. Work is admitted only after the tenure's OnAcquired
// has returned (see Config.AcquiredTimeout).
//
// A planned end of tenure (the ring moved the partition away, a graceful
// Close, an operator's drain of the node) lets the work already admitted
// run on, with its Context live, until every Held has been released or
// Config.DrainTimeout has passed; only then is Context cancelled (ErrMoved
// or ErrClosed). Work admitted before a planned move thus finishes
// normally. A loss (the Session ended or its safe deadline passed, or the
// claim was deleted by someone else) cancels Context at once, with
// ErrLost: the next owner may already be serving. The package
// documentation's table gives the order of these events.
//
// Work whose tenure ended under it (Context is done, or a store refused
// its token) should stop and return an error that says so:
// context.Cause(Context), which wraps ErrMoved, ErrLost or ErrClosed, or
// the store's error, which wraps fence.ErrStale. The router turns those
// into an answer that the caller retries at the next owner.
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
	// (fence.FromContext) and, when the node has a Config.Signer, the
	// token's signature (fence.SignatureFromContext).
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
