package etcderr

import "context"

// clientLife is the part of *clientv3.Client that tells whether it has been
// closed: Ctx returns a context that Close cancels.
type clientLife interface{ Ctx() context.Context }

// Closed reports whether cli is an etcd client that has been closed (a
// *clientv3.Client after Close): a call through it never reaches etcd, it
// waits for its context to end. A client without a Ctx method is never
// reported closed.
func Closed(cli any) bool {
	c, ok := cli.(clientLife)
	if !ok {
		return false
	}
	ctx := c.Ctx()
	return ctx != nil && ctx.Err() != nil
}

// BindClient returns a context that ends when ctx does or, with cause, when
// the etcd client cli is closed, so that calls through a client closed
// meanwhile return at once instead of waiting out ctx. cancel must be
// called to release it. A client without a Ctx method binds nothing.
func BindClient(ctx context.Context, cli any, cause error) (context.Context, context.CancelFunc) {
	bound, cancel := context.WithCancelCause(ctx)
	c, ok := cli.(clientLife)
	if !ok || c.Ctx() == nil {
		return bound, func() { cancel(context.Canceled) }
	}
	stop := context.AfterFunc(c.Ctx(), func() { cancel(cause) })
	return bound, func() {
		stop()
		cancel(context.Canceled)
	}
}
