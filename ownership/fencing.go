package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/fleetview"
)

// fenceParallelism bounds the partitions whose fencers run at once.
const fenceParallelism = 16

// advanceAller is a fencer that raises many floors in one call, such as
// sqlfence.Fencer. If some of the tokens are stale, the others are
// advanced, and the error wraps a *fence.StaleError for each stale one
// (errors.Is fence.ErrStale); any other error fails every token.
type advanceAller interface {
	AdvanceAll(ctx context.Context, ts []fence.Token) error
}

// flushFences advances the fencers of the queued tenures, on a goroutine of
// the generation, and reports the results to the event loop (fenced). The
// queued tenures are those acquired together (one or more claim batches,
// and retries): a fencer with AdvanceAll advances them all in one call.
func (l *loop) flushFences() {
	if len(l.pendingFences) == 0 {
		return
	}
	n, gen, ts := l.n, l.gen, l.pendingFences
	l.pendingFences = nil
	if !n.batchFencing {
		n.spawn(func() { n.advanceEach(gen, ts) })
		return
	}
	n.spawn(func() { n.post(gen, fenceDone{ts: ts, errs: n.advanceTogether(gen.ctx, ts)}) })
}

// advanceEach runs every fencer for each tenure of ts, in order, tenures in
// parallel, and reports each tenure's result as soon as it has it, so that
// a slow partition delays no other.
func (n *Node) advanceEach(gen *generation, ts []*tenure) {
	sem := make(chan struct{}, fenceParallelism)
	var wg sync.WaitGroup
	for _, t := range ts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			for i, f := range n.cfg.Fencers {
				if err = n.advanceOne(i, f, t); err != nil {
					break
				}
			}
			n.post(gen, fenceDone{ts: []*tenure{t}, errs: []error{err}})
		})
	}
	wg.Wait()
}

// advanceOne advances fencer number i, f, to t's token.
func (n *Node) advanceOne(i int, f fence.Fencer, t *tenure) error {
	if t.ctx.Err() != nil {
		return context.Cause(t.ctx)
	}
	if err := f.Advance(t.ctx, t.token); err != nil {
		return fmt.Errorf("fencer %d: %w", i, err)
	}
	return retire(t.ctx, i, f, t)
}

// retireTokens returns the tokens that retire the partitions a tenure over
// p replaces in a resize of the partition count (Shape.Replaced): each
// replaced partition's scope at the revision of the change. Every token of
// a replaced partition has an epoch below it and every tenure of p one
// above it, so advancing a replaced scope to it refuses the old holders
// and never a new one (a source and a target may share a partition
// number, hence a scope).
func retireTokens(s *fleetview.Shape, p int) []fence.Token {
	ps, rev := s.Replaced(p)
	if rev == 0 {
		return nil
	}
	out := make([]fence.Token, 0, len(ps))
	for _, q := range ps {
		out = append(out, fence.Token{Scope: fence.PartitionScope(q), Epoch: rev})
	}
	return out
}

// retire advances fencer number i, f, to t's retire tokens. A stale one
// is already retired (its floor is at the same revision or above, raised
// by another target of the group).
func retire(ctx context.Context, i int, f fence.Fencer, t *tenure) error {
	for _, tok := range t.retire {
		if err := f.Advance(ctx, tok); err != nil && !errors.Is(err, fence.ErrStale) {
			return fmt.Errorf("fencer %d: retire %s at %d: %w", i, tok.Scope, tok.Epoch, err)
		}
	}
	return nil
}

// advanceTogether runs the fencers, in order, for the tenures ts, and
// returns each one's error. A fencer with AdvanceAll is called once for all
// the tenures still to fence (those whose earlier fencers succeeded and
// whose tenure has not ended); a stale token fails only its tenure. The
// other fencers are advanced per token, tenures in parallel.
func (n *Node) advanceTogether(ctx context.Context, ts []*tenure) []error {
	errs := make([]error, len(ts))
	for i, f := range n.cfg.Fencers {
		var todo []int
		for j, t := range ts {
			switch {
			case errs[j] != nil:
			case t.ctx.Err() != nil:
				errs[j] = context.Cause(t.ctx)
			default:
				todo = append(todo, j)
			}
		}
		if len(todo) == 0 {
			break
		}
		all, ok := f.(advanceAller)
		if !ok {
			n.advanceParallel(i, f, ts, todo, errs)
			continue
		}
		toks := make([]fence.Token, len(todo))
		for k, j := range todo {
			toks[k] = ts[j].token
		}
		if err := all.AdvanceAll(ctx, toks); err != nil {
			stale := staleTokens(err)
			for _, j := range todo {
				if se, ok := stale[ts[j].token]; ok {
					errs[j] = fmt.Errorf("fencer %d: %w", i, se)
				} else if len(stale) == 0 {
					errs[j] = fmt.Errorf("fencer %d: advance %d tokens: %w", i, len(toks), err)
				}
			}
		}
		for _, j := range todo {
			if errs[j] == nil {
				errs[j] = retire(ts[j].ctx, i, f, ts[j])
			}
		}
	}
	return errs
}

// advanceParallel advances fencer number i, f, to the tokens of ts[j] for j
// in todo, in parallel, and records each error in errs[j].
func (n *Node) advanceParallel(i int, f fence.Fencer, ts []*tenure, todo []int, errs []error) {
	sem := make(chan struct{}, fenceParallelism)
	var wg sync.WaitGroup
	for _, j := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[j] = n.advanceOne(i, f, ts[j])
		})
	}
	wg.Wait()
}

// staleTokens returns the stale tokens that err names: every
// *fence.StaleError it wraps, by token. It is empty if err is not a stale
// error or names no token.
func staleTokens(err error) map[fence.Token]*fence.StaleError {
	if !errors.Is(err, fence.ErrStale) {
		return nil
	}
	out := map[fence.Token]*fence.StaleError{}
	var walk func(error)
	walk = func(err error) {
		if se, ok := err.(*fence.StaleError); ok {
			out[fence.Token{Scope: se.Scope, Epoch: se.Presented}] = se
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// fenced handles the result of advancing t's fencers: serve, retry after a
// backoff, or, if the tenure ended meanwhile, delete its claim.
func (l *loop) fenced(t *tenure, err error) {
	rec := l.rec(t.p)
	if rec.t != t || (rec.phase != phaseFencing && rec.phase != phaseAborting) {
		return
	}
	switch {
	case rec.phase == phaseAborting || t.ctx.Err() != nil:
		if rec.phase == phaseFencing {
			l.transition(t.p, idle, reasonLost) // the generation ended under it
		}
		if l.holds(t.p, t) {
			l.startDelete(t.p, t.token.Epoch, nil)
		} else {
			l.transition(t.p, idle, 0)
		}
	case err != nil:
		l.n.report.fencerFailed(t, err)
		wait := &record{phase: phaseFenceWait, t: t, attempts: rec.attempts + 1}
		l.transition(t.p, wait, 0)
		l.n.log.Warn("advance fencers; the partition stays unserved until they succeed",
			"partition", t.p, "epoch", t.token.Epoch, "error", err, "attempt", wait.attempts)
		l.n.after(l.gen, backoff(wait.attempts-1), fenceRetry{p: t.p, wait: wait})
	default:
		l.startServing(t)
	}
}

// retryFence advances the fencers of wait's tenure again once the backoff
// of wait is over, unless p's record has moved on.
func (l *loop) retryFence(p int, wait *record) {
	if l.rec(p) == wait {
		l.transition(p, &record{phase: phaseFencing, t: wait.t, attempts: wait.attempts}, 0)
		l.pendingFences = append(l.pendingFences, wait.t)
	}
}
