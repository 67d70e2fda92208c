package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/clock"
)

// fence advances every fencer of the election, in order, to t's token,
// before Campaign hands t out. The fencers' context ends when the term ends
// or ctx is done. If a fencer fails, or the term ends or the session's safe
// deadline passes meanwhile, the term is resigned and the error says why:
// the session's error or ctx's first, then ErrFence wrapping the fencer's
// error, or the reason the term ended.
func (e *Election) fence(ctx context.Context, t *Term) error {
	if len(e.cfg.Fencers) == 0 {
		return nil
	}
	fctx, cancel := context.WithCancelCause(t.ctx)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()

	start := e.cfg.Clock.Now()
	err := e.advance(fctx, t)
	if err == nil {
		if err = e.stands(t); err == nil {
			if fctx.Err() == nil {
				t.log.Info("fencers advanced", "fencers", len(e.cfg.Fencers), "duration", e.cfg.Clock.Since(start))
				return nil
			}
			err = context.Cause(fctx)
		}
	}
	// Give the term up: its key goes now, not with the lease.
	rctx, rcancel := clock.WithTimeout(context.WithoutCancel(ctx), e.cfg.Clock, e.cfg.ResignTimeout)
	defer rcancel()
	rerr := t.resign(rctx, fmt.Errorf("%w: %w", ErrResigned, err))
	if e.session.Err() != nil || ctx.Err() != nil {
		return e.campaignErr(ctx, err)
	}
	err = fmt.Errorf("election %q: campaign: epoch %d: %w", e.cfg.Name, t.token.Epoch, err)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// advance runs every fencer for t, in order, and returns an error wrapping
// ErrFence and the first failure.
func (e *Election) advance(ctx context.Context, t *Term) error {
	for i, f := range e.cfg.Fencers {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: fencer %d not run: %w", ErrFence, i, context.Cause(ctx))
		}
		if err := f.Advance(ctx, t.token); err != nil {
			e.met.fencerFailed()
			t.log.Warn("fencer failed; giving the term up", "fencer", i, "error", err)
			return fmt.Errorf("%w: fencer %d: %w", ErrFence, i, err)
		}
	}
	return nil
}

// stands returns nil if t still stands with its session's safe deadline
// ahead, and the reason it does not otherwise.
func (e *Election) stands(t *Term) error {
	if err := t.Err(); err != nil {
		return err
	}
	if now, dl := e.cfg.Clock.Now(), e.session.safeDeadline(); !now.Before(dl) {
		return fmt.Errorf("election %q: epoch %d: %w: fenced at %v past the safe deadline", e.cfg.Name, t.token.Epoch, ErrSessionExpired, now.Sub(dl))
	}
	return nil
}
