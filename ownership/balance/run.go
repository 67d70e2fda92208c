package balance

import (
	"context"
	"errors"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/clock"
)

// Run campaigns in e and, while it leads, runs a pass every
// Config.Interval, until ctx ends. A pass refused as stale is planned
// again at the next interval; while suspended, passes are planned (and
// reported) but write nothing; a deposed balancer campaigns again. It
// returns ctx's error.
func (b *Balancer) Run(ctx context.Context, e *election.Election) error {
	for {
		term, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.cfg.Logger.Warn("balancer campaign", "error", err)
			if !clock.Sleep(ctx, b.cfg.Clock, b.cfg.Interval) {
				return ctx.Err()
			}
			continue
		}
		b.lead(ctx, term)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// lead runs passes while term stands. It logs when passes pause for a
// resize of the partition count and when they resume.
func (b *Balancer) lead(ctx context.Context, term *election.Term) {
	tctx := term.Context()
	var pause pause
	resizing := ""
	for {
		if !clock.Sleep(tctx, b.cfg.Clock, b.cfg.Interval) || ctx.Err() != nil {
			return
		}
		pctx, sp := b.startPass(tctx, term)
		pl, err := b.Plan(pctx)
		if err == nil {
			if pl.Resizing != resizing {
				if pl.Resizing != "" {
					b.cfg.Logger.Info("balance passes paused: a resize of the partition count is in progress", "resize", pl.Resizing)
				} else {
					b.cfg.Logger.Info("balance passes resumed: the resize of the partition count ended", "resize", resizing)
				}
				resizing = pl.Resizing
			}
			err = b.Apply(pctx, term, pl)
		}
		endPass(sp, pl, err)
		b.paused(&pause, pl, err)
		switch {
		case errors.Is(err, ErrDeposed):
			return
		case errors.Is(err, errAlarm):
		case errors.Is(err, ErrSuspended):
			b.cfg.Logger.Debug("balance pass suspended", "error", err)
		case err != nil && tctx.Err() == nil:
			b.cfg.Logger.Warn("balance pass", "error", err)
		}
	}
}
