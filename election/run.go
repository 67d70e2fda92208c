package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/retry"

	"github.com/tenure-go/tenure/fence"
)

// Run campaigns, runs fn under the won term's context and token, and when
// the term ends campaigns again, until ctx is done or the session ends.
//
// fn's context carries the term's token (fence.FromContext), with its
// signature when ElectionConfig.Signer is set (fence.SignatureFromContext),
// and is cancelled the moment the term ends or ctx is done; fn must then
// return promptly. After fn returns, Run resigns the
// term (bounded by ElectionConfig.ResignTimeout, even if ctx is done) so
// that the next candidate takes over at once. If fn returns an error while
// the term still stands, Run returns that error; if it returns nil while the
// term stands, Run gives the term up and campaigns again.
//
// Run returns ctx's error when ctx is done, an error wrapping the session's
// error (errors.Is ErrSessionDone) when the session ends — a node then opens
// a new Session and starts again —, one wrapping ErrElectionClosed after
// Close, or fn's error as above. Transient etcd
// failures while campaigning, and fencer failures (ErrFence: the term won
// is resigned), are retried with backoff; fn and OnElected run only once
// every fencer of ElectionConfig.Fencers was advanced to the term's token. Hooks, if configured,
// are called from Run's goroutine in order: OnElected before fn, OnEnded
// after fn has returned and the term has ended.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context, t fence.Token) error) error {
	if e.session == nil {
		return fmt.Errorf("election %q: run: %w", e.cfg.Name, ErrNoSession)
	}
	if fn == nil {
		return fmt.Errorf("%w: election %q: run: nil fn", ErrInvalidConfig, e.cfg.Name)
	}
	return retry.Do(ctx, e.cfg.Clock, retry.Background(), func(attempt int) (bool, error) {
		t, err := e.Campaign(ctx)
		if err != nil {
			switch {
			case errors.Is(err, ErrSessionDone), errors.Is(err, ErrAlreadyCampaigning), errors.Is(err, ErrElectionClosed):
				return true, err
			case ctx.Err() != nil:
				return true, ctx.Err()
			}
			e.log.Warn("campaign failed; retrying", "error", err, "attempt", attempt)
			return false, err
		}
		tok := t.Token()
		// fn's context (and OnElected's) ends with the term or with ctx.
		fctx, fcancel := context.WithCancelCause(t.Context())
		stop := context.AfterFunc(ctx, func() { fcancel(context.Cause(ctx)) })
		tctx := fence.NewSignedContext(fctx, tok, t.Signature())
		if h := e.cfg.Hooks; h != nil && h.OnElected != nil {
			h.OnElected(tctx, tok)
		}
		ferr := fn(tctx, tok)
		stop()
		fcancel(nil)
		reason := t.Err()
		standing := reason == nil
		if standing {
			why := ferr
			if why == nil {
				why = ctx.Err()
			}
			if why == nil {
				why = errors.New("fn returned")
			}
			reason = fmt.Errorf("%w: %w", ErrResigned, why)
		}
		rctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), e.cfg.Clock, e.cfg.ResignTimeout)
		if rerr := t.Resign(rctx); rerr != nil {
			e.log.Warn("resign failed; the key goes with the lease or the next campaign", "error", rerr)
		}
		cancel()
		if h := e.cfg.Hooks; h != nil && h.OnEnded != nil {
			h.OnEnded(tok, reason)
		}
		if err := ctx.Err(); err != nil {
			return true, err
		}
		if standing && ferr != nil {
			return true, fmt.Errorf("election %q: epoch %d: %w", e.cfg.Name, tok.Epoch, ferr)
		}
		if serr := e.session.Err(); serr != nil {
			return true, fmt.Errorf("election %q: run: %w", e.cfg.Name, serr)
		}
		return false, nil // campaign again
	})
}
