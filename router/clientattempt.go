package router

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// send sends one attempt of req to the node at addr, with body (nil: req's
// own) and the idempotency key idem. The attempt is abandoned if no answer
// has come within the ClientConfig's AttemptTimeout, with a
// *follow.AttemptTimeoutError (errors.Is ErrAttemptTimeout and
// context.DeadlineExceeded); the body of an answer is read under ctx
// alone, and closing it releases the attempt.
func (c *Client) send(ctx context.Context, req *http.Request, body io.ReadCloser, idem, addr string) (*http.Response, error) {
	actx, cancel := context.WithCancel(ctx)
	out := req.Clone(actx)
	out.URL.Scheme = c.cfg.Scheme
	out.URL.Host = addr
	out.Host = ""
	out.RequestURI = ""
	if body != nil {
		out.Body = body
	}
	out.Header.Set(HeaderIdempotencyKey, idem)
	c.trace.Inject(actx, propagation.HeaderCarrier(out.Header))
	var timedOut atomic.Bool
	stop := func() bool { return true }
	if t := c.cfg.AttemptTimeout; t > 0 {
		timer := c.cfg.Clock.AfterFunc(t, func() {
			timedOut.Store(true)
			cancel()
		})
		stop = timer.Stop
	}
	resp, err := c.httpc.Do(out)
	if !stop() && timedOut.Load() {
		// The bound passed, whatever Do returned: the attempt was cut.
		if err == nil {
			drain(resp.Body)
		}
		cancel()
		return nil, &follow.AttemptTimeoutError{Err: ErrAttemptTimeout, Client: "router", Addr: addr, Bound: c.cfg.bound()}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &attemptBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// attemptBody is the body of an answered attempt: closing it releases the
// attempt's context.
type attemptBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// unroutedError is the error of an attempt that was not sent: the Client
// knows no node with an address to send the key's request to. Its message
// says why (no live member, or an owner without an address); it unwraps to
// the *ownership.WrongOwnerError of the route, so that errors.Is(err,
// ownership.ErrNoOwner) and errors.Is(err, ownership.ErrNotOwner) hold.
type unroutedError struct {
	we *ownership.WrongOwnerError
}

func (e *unroutedError) Error() string {
	if e.we.Owner == "" {
		return fmt.Sprintf("router: unavailable: no node serves partition %d: the fleet has no live member that is not drained (every session ended, or no node has joined)", e.we.Partition)
	}
	return fmt.Sprintf("router: unavailable: partition %d: its owner %q advertises no address", e.we.Partition, e.we.Owner)
}

func (e *unroutedError) Unwrap() error { return e.we }

// refusedError is the error of an attempt that a node refused: the
// refusal, and the wrong-owner error its hint stands for (nil for a stale
// or unavailable refusal), so that errors.Is(err, ownership.ErrNotOwner)
// holds for the router's own refusals and errors.Is(err, fence.ErrStale)
// for stale ones.
type refusedError struct {
	*httpfence.Refusal
	hint *ownership.WrongOwnerError
}

func (e *refusedError) Unwrap() []error {
	if e.hint == nil {
		return []error{e.Refusal}
	}
	return []error{e.Refusal, e.hint}
}

// drain reads a little of body, so that its connection can be reused, and
// closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}
