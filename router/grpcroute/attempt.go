package grpcroute

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// attempt is one attempt of a call under the ClientConfig's
// AttemptTimeout (see its documentation for what the bound means for a
// unary and a streaming call): the attempt's context, cancelled to cut it
// off, and the clock of the caller's wait for its answer. The clock runs
// once the balancer has sent the attempt to a node (start), while the
// caller waits on it (enter, leave), from the later of the start of the
// wait and the last message sent (progress), until the answer (answer).
// A nil *attempt, of a Client without a bound, does nothing.
type attempt struct {
	ctx    context.Context
	cancel context.CancelFunc
	clock  clockwork.Clock
	bound  follow.Bound // the Client's, with its defaults

	mu       sync.Mutex
	timer    clockwork.Timer // made when first armed
	armed    bool            // timer is pending
	sent     bool            // the balancer sent the attempt to a node
	waiting  int             // the caller's calls blocked on the attempt
	since    time.Time       // when the counted wait began
	answered bool
	cut      bool
}

// newAttempt returns the next attempt of a call under ctx, nil if the
// Client has no bound.
func (c *Client) newAttempt(ctx context.Context) *attempt {
	if c.cfg.AttemptTimeout < 0 {
		return nil
	}
	actx, cancel := context.WithCancel(ctx)
	return &attempt{ctx: actx, cancel: cancel, clock: c.cfg.Clock, bound: c.cfg.bound()}
}

// context returns the attempt's context, ctx (the call's) without a
// bound.
func (a *attempt) context(ctx context.Context) context.Context {
	if a == nil {
		return ctx
	}
	return a.ctx
}

// start starts the attempt's clock: the balancer sent it to a node.
func (a *attempt) start() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent, a.since = true, a.clock.Now()
	a.arm()
}

// enter counts a call of the caller that waits on the attempt.
func (a *attempt) enter() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting++
	if a.waiting == 1 {
		a.since = a.clock.Now()
	}
	a.arm()
}

// leave ends a wait that enter counted; progress reports that it sent a
// message, from which the next wait counts.
func (a *attempt) leave(progress bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting--
	if progress {
		a.since = a.clock.Now()
	}
}

// progress records a message the caller sent without waiting.
func (a *attempt) progress() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.since = a.clock.Now()
}

// answer records that the node answered: the attempt is no longer
// bounded.
func (a *attempt) answer() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answered = true
}

// arm makes sure the timer fires when the counted wait reaches the
// bound, if the clock runs. a.mu is held.
func (a *attempt) arm() {
	if a.armed || !a.sent || a.waiting == 0 || a.answered || a.cut {
		return
	}
	d := a.bound.AttemptTimeout - a.clock.Since(a.since)
	a.armed = true
	if a.timer == nil {
		a.timer = a.clock.AfterFunc(d, a.fire)
		return
	}
	a.timer.Reset(d)
}

// fire cuts the attempt off if the caller has waited the bound for it
// without an answer, and otherwise arms the timer again if the clock
// still runs.
func (a *attempt) fire() {
	a.mu.Lock()
	a.armed = false
	if !a.sent || a.waiting == 0 || a.answered || a.cut {
		a.mu.Unlock()
		return
	}
	if a.clock.Since(a.since) < a.bound.AttemptTimeout {
		a.arm()
		a.mu.Unlock()
		return
	}
	a.cut = true
	a.mu.Unlock()
	a.cancel()
}

// watchHeader marks the attempt answered when the stream cs's header
// comes (or the stream ends first), so that a handler that sends its
// header and then stays silent is not cut off. It returns when it does.
func (a *attempt) watchHeader(cs grpc.ClientStream) {
	_, _ = cs.Header()
	a.answer()
}

// end releases the attempt, whose last call returned err, and returns
// the error of the attempt: err, or the error of its cut (naming addr,
// where it went) when the bound cut it off while the call's context ctx
// (parent of the attempt's) lasts.
func (a *attempt) end(ctx context.Context, addr string, err error) error {
	if a == nil {
		return err
	}
	a.mu.Lock()
	cut := a.cut
	a.answered = true // no more cuts
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
	a.cancel()
	if err != nil && cut && ctx.Err() == nil {
		return &attemptTimeoutError{follow.AttemptTimeoutError{Err: router.ErrAttemptTimeout, Client: "grpcroute", Addr: addr, Bound: a.bound}}
	}
	return err
}

// attemptTimeoutError is the error of an attempt cut off by
// AttemptTimeout (follow.AttemptTimeoutError: errors.Is
// router.ErrAttemptTimeout and context.DeadlineExceeded); it travels as
// codes.DeadlineExceeded.
type attemptTimeoutError struct {
	follow.AttemptTimeoutError
}

// GRPCStatus makes the error travel as codes.DeadlineExceeded.
func (e *attemptTimeoutError) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, e.Error())
}
