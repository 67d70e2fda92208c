package ownership

import (
	"context"
	"fmt"
	"sync"
)

// fenceParallelism bounds the partitions whose fencers run at once.
const fenceParallelism = 16

// flushFences advances the fencers of the queued tenures, on goroutines of
// the generation, and reports each result to the event loop (fenced).
func (l *loop) flushFences() {
	if len(l.pendingFences) == 0 {
		return
	}
	n, gen, ts := l.n, l.gen, l.pendingFences
	l.pendingFences = nil
	n.spawn(func() {
		sem := make(chan struct{}, fenceParallelism)
		var wg sync.WaitGroup
		for _, t := range ts {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				err := n.advance(t)
				n.post(gen, func(l *loop) { l.fenced(t, err) })
			})
		}
		wg.Wait()
	})
}

// advance runs every fencer for t, in order.
func (n *Node) advance(t *tenure) error {
	for i, f := range n.cfg.Fencers {
		if err := t.ctx.Err(); err != nil {
			return context.Cause(t.ctx)
		}
		if err := f.Advance(t.ctx, t.token); err != nil {
			return fmt.Errorf("fencer %d: %w", i, err)
		}
	}
	return nil
}

// fenced handles the result of advancing t's fencers: serve, retry after a
// backoff, or, if the tenure ended meanwhile, delete its claim.
func (l *loop) fenced(t *tenure, err error) {
	st := l.state(t.p)
	if st.t != t || (st.phase != phaseFencing && st.phase != phaseAborting) {
		return
	}
	switch {
	case st.phase == phaseAborting || t.ctx.Err() != nil:
		if st.phase == phaseFencing {
			l.end(t.p, idle, ReasonLost) // the generation ended under it
		}
		if l.holds(t.p, t) {
			l.startDelete(t.p, t.token.Epoch)
		} else {
			l.set(t.p, idle)
		}
	case err != nil:
		l.n.ops.fencerFailed(t, err)
		wait := &pstate{phase: phaseFenceWait, t: t, attempts: st.attempts + 1}
		l.set(t.p, wait)
		l.n.log.Warn("advance fencers; the partition stays unserved until they succeed",
			"partition", t.p, "epoch", t.token.Epoch, "error", err, "attempt", wait.attempts)
		l.n.after(l.gen, backoff(wait.attempts-1), func(l *loop) {
			if l.state(t.p) == wait {
				l.set(t.p, &pstate{phase: phaseFencing, t: t, attempts: wait.attempts})
				l.pendingFences = append(l.pendingFences, t)
			}
		})
	default:
		l.serveTenure(t)
	}
}
