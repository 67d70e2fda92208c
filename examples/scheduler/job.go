package main

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
)

// writeTimeout bounds one run's transaction.
const writeTimeout = 10 * time.Second

// retryAfter is how long the leader waits after a failed run before it
// tries again.
const retryAfter = time.Second

// job closes billing periods: the function a leader runs for its term.
type job struct {
	ledger  *ledger
	node    string
	tenants []string
	period  time.Duration
	// hold is the demonstration knob: how long to wait between deciding
	// which period to close and writing it.
	hold time.Duration
	// shutdown is done when the process is asked to stop.
	shutdown context.Context
	log      hclog.Logger
	metrics  *metrics
}

// errStale ends a term whose run the database refused.
var errStale = errors.New("a newer leader fenced the job")

// lead is the election's fn: while the term lasts, close every period that
// has ended, for every tenant, then wait for the next one to end. A new
// leader begins where the database says the job stands, so the periods a
// previous leader missed are closed first.
func (j *job) lead(ctx context.Context, t fence.Token) error {
	for {
		next, err := j.catchUp(ctx, t)
		switch {
		case errors.Is(err, errStale):
			return nil // Run gives the term up and campaigns again
		case ctx.Err() != nil:
			return nil // the term ended (a read was cut short, say)
		case err != nil:
			j.metrics.failures.Inc()
			j.log.Warn("run failed; retrying", "error", err, "retry_in", retryAfter)
			next = time.Now().Add(retryAfter)
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// catchUp closes, for each tenant, every period that has ended, and
// returns when the next one ends.
func (j *job) catchUp(ctx context.Context, t fence.Token) (next time.Time, err error) {
	// A tenant without any closed period starts at the period that ended
	// last when the pass began, so that tenants new together start together.
	began := time.Now()
	for _, tenant := range j.tenants {
		for {
			// Stopping here when the term has ended saves work, but it is
			// no guarantee: the term can end right after this check. The
			// fence in the database is the guarantee.
			if ctx.Err() != nil {
				return time.Time{}, nil
			}
			start, err := j.ledger.nextPeriod(ctx, tenant, j.period, began)
			if err != nil {
				return time.Time{}, err
			}
			now := time.Now()
			if !due(start, j.period, now) {
				if next.IsZero() || start.Add(j.period).Before(next) {
					next = start.Add(j.period)
				}
				break
			}
			if err := j.run(t, closing{tenant: tenant, start: start, end: start.Add(j.period), node: j.node, token: t}); err != nil {
				return time.Time{}, err
			}
		}
	}
	return next, nil
}

// run closes one period that the leader has decided to close.
//
// The write does not use the term's context, on purpose: a term can end
// after any check of it, so the database decides, with the token, whether
// this leader may still write. Cancelling the write when the term ends
// would only turn a definite answer into an unknown outcome.
func (j *job) run(t fence.Token, c closing) error {
	if j.hold > 0 {
		j.log.Info("holding before the write", "tenant", c.tenant, "period_start", stamp(c.start), "epoch", t.Epoch, "hold", j.hold)
		timer := time.NewTimer(j.hold)
		select {
		case <-j.shutdown.Done():
			timer.Stop()
			return nil // the next leader closes the period
		case <-timer.C:
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(j.shutdown), writeTimeout)
	defer cancel()
	err := j.ledger.close(wctx, c)
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		j.metrics.stale.Inc()
		j.log.Warn("stale run rejected", "tenant", c.tenant, "period_start", stamp(c.start), "period_end", stamp(c.end),
			"epoch", t.Epoch, "current_epoch", stale.Current)
		return errStale
	case err != nil:
		return err
	}
	j.metrics.runs.WithLabelValues(c.tenant).Inc()
	j.metrics.lastClose.WithLabelValues(c.tenant).Set(float64(c.end.Unix()))
	j.log.Info("period closed", "tenant", c.tenant, "period_start", stamp(c.start), "period_end", stamp(c.end), "epoch", t.Epoch)
	return nil
}
