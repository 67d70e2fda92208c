package admit

import (
	"context"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
)

// WorkContext returns the context that work admitted by h runs under: it
// carries ctx's values and deadline and h's token (fence.FromContext) with
// its signature, if the partition's context has one, and
// it ends when ctx ends or when h's tenure ends, in the latter case with the
// partition context's cause (ownership.ErrMoved, ErrLost or ErrClosed).
// The returned function releases its resources.
func WorkContext(ctx context.Context, h ownership.Held) (context.Context, context.CancelFunc) {
	part := h.Context
	if part == nil {
		part = fence.NewContext(context.Background(), h.Token)
	}
	if ctx.Done() == nil {
		// ctx can never end: the partition's context alone ends the work.
		return &workCtx{part: part, caller: ctx}, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(part, func() { cancel(context.Cause(part)) })
	sig, _ := fence.SignatureFromContext(part)
	return fence.NewSignedContext(wctx, h.Token, sig), func() {
		stop()
		cancel(context.Canceled)
	}
}

// workCtx is the work's context when the caller's context can never end:
// Done, Err and Cause come from the partition's context, and values are
// looked up there first, then in the caller's context. The partition's
// context carries nothing but its token and its cancellation (it derives
// from the node's own root context), so the token it carries wins over any
// token the caller's context holds, and the caller's other values show
// through. It costs one allocation, where deriving a cancellable context
// from both costs several.
type workCtx struct {
	part   context.Context
	caller context.Context
}

func (c *workCtx) Deadline() (time.Time, bool) { return c.part.Deadline() }
func (c *workCtx) Done() <-chan struct{}       { return c.part.Done() }
func (c *workCtx) Err() error                  { return c.part.Err() }
func (c *workCtx) String() string              { return "admit.WorkContext" }

func (c *workCtx) Value(key any) any {
	if v := c.part.Value(key); v != nil {
		return v
	}
	return c.caller.Value(key)
}
