package admit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
)

// WorkContext returns the context that work admitted by h runs under: it
// carries ctx's values and deadline, h's token (fence.FromContext) with its
// signature if the partition's context has one, and the value v under key
// k (none when k is nil); it ends when ctx ends or when h's tenure ends,
// in the latter case with the partition context's cause
// (ownership.ErrMoved, ErrLost or ErrClosed). Its Release ends it (with
// context.Canceled) and releases its resources; call it when the work is
// done.
//
// The context costs one allocation. It follows the ends of ctx and of the
// tenure only once it is asked about its end: the first call of Done, of
// Err while ctx or the tenure has ended, or of context.Cause (which looks
// up the context package's own key) derives a context that ends with
// either, as context.WithCancelCause and context.AfterFunc would; work
// that never asks pays for neither. Its Cause is the partition's when the
// tenure had ended by the time the context was first asked (even if ctx
// had ended too: the order of two ends no one watched is not known), or
// ended first after that; else ctx's.
func WorkContext(ctx context.Context, h ownership.Held, k, v any) *Work {
	part := h.Context
	if part == nil {
		part = fence.NewContext(context.Background(), h.Token)
	}
	return &Work{caller: ctx, part: part, k: k, v: v}
}

// Work is the context of admitted work (WorkContext). Values are looked
// up in k, then in the partition's context, then in the caller's: the
// partition's context carries nothing but its token and its cancellation
// (it derives from the node's own root context), so the token it carries
// wins over any token the caller's context holds, and the caller's other
// values show through. Its end is that of ended, set once when it is
// first asked (follow).
type Work struct {
	caller, part context.Context
	k, v         any

	ended      atomic.Pointer[ended]
	isReleased atomic.Bool // Release was called
	mu         sync.Mutex  // serializes follow and Release
	released   error       // the cause Release recorded; nil before it
}

// ended is what a work context's end follows: ctx, which ends with the
// caller's context or the tenure, and what Release must stop.
type ended struct {
	ctx    context.Context
	stop   func() bool             // nil when nothing follows the tenure
	cancel context.CancelCauseFunc // nil when ctx is not the work's own
}

func (w *Work) Deadline() (time.Time, bool) { return w.caller.Deadline() }
func (w *Work) Done() <-chan struct{}       { return w.follow().Done() }
func (w *Work) String() string              { return "admit.WorkContext" }

// Err is nil while neither the caller's context nor the tenure has ended
// and no one followed them; else it is the followed context's, so that it
// agrees with Done.
func (w *Work) Err() error {
	if e := w.ended.Load(); e != nil {
		return e.ctx.Err()
	}
	if w.part.Err() == nil && w.caller.Err() == nil && !w.isReleased.Load() {
		return nil
	}
	return w.follow().Err()
}

func (w *Work) Value(key any) any {
	if w.k != nil && key == w.k {
		return w.v
	}
	if _, ok := key.(*int); ok {
		// context.Cause and context.WithCancel look up the context
		// package's *cancelCtx under a private *int key: the followed
		// context's, which has the right cause (or the partition's own,
		// below, when the partition's context is followed itself).
		if f := w.follow(); f != w.part {
			if v := f.Value(key); v == any(f) {
				return v
			}
		}
	}
	if v := w.part.Value(key); v != nil {
		return v
	}
	return w.caller.Value(key)
}

// follow returns the context whose end is the work's, deriving it the
// first time: one already ended with the partition's cause if the tenure
// has ended (or with the cause Release recorded after it); the partition's
// context itself if the caller's context can never end; else one that ends
// when the caller's context ends, with its cause, or when the tenure ends,
// with the partition's cause.
func (w *Work) follow() context.Context {
	if e := w.ended.Load(); e != nil {
		return e.ctx
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.ended.Load(); e != nil {
		return e.ctx
	}
	var e ended
	switch {
	case w.released != nil:
		e.ctx, e.cancel = context.WithCancelCause(context.Background())
		e.cancel(w.released)
	case w.part.Err() != nil:
		e.ctx, e.cancel = context.WithCancelCause(context.Background())
		e.cancel(context.Cause(w.part))
	case w.caller.Done() == nil:
		e.ctx = w.part
	default:
		ctx, cancel := context.WithCancelCause(w.caller)
		part := w.part
		e.ctx, e.cancel = ctx, cancel
		e.stop = context.AfterFunc(part, func() { cancel(context.Cause(part)) })
	}
	w.ended.Store(&e)
	return e.ctx
}

// Release ends the work's context with context.Canceled, unless it ended
// already or it follows the partition's context alone (its caller's
// context can never end), and stops following the tenure. A context not
// followed yet
// records the cause it would have had (the partition's or the caller's if
// either has ended, else context.Canceled) for a late follow.
func (w *Work) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.ended.Load(); e != nil {
		if e.stop != nil {
			e.stop()
		}
		if e.cancel != nil {
			e.cancel(context.Canceled)
		}
		return
	}
	switch {
	case w.released != nil:
	case w.part.Err() != nil:
		w.released = context.Cause(w.part)
	case w.caller.Err() != nil:
		w.released = context.Cause(w.caller)
	default:
		w.released = context.Canceled
	}
	w.isReleased.Store(true)
}
