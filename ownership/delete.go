package ownership

import (
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
)

// Deleting a claim: the last stage of a handoff, and the clean-up of a
// claim left by an earlier session of this node or by a tenure that ended
// before it served. startDelete queues it, flushDeletes batches the queued
// deletions into transactions, deleted handles their results.

// startDelete queues the deletion of p's claim at epoch; b is the handoff
// batch of a planned release, nil for any other deletion.
func (l *loop) startDelete(p int, epoch int64, b *handoff) {
	l.transition(p, &record{phase: phaseDeleting, epoch: epoch, handoff: b}, 0)
	l.pendingDeletes = append(l.pendingDeletes, p)
}

// flushDeletes deletes the queued claims, one transaction per batch.
func (l *loop) flushDeletes() {
	if len(l.pendingDeletes) == 0 {
		return
	}
	n, gen := l.n, l.gen
	for _, batch := range chunks(l.pendingDeletes, l.batch) {
		recs := make([]*record, len(batch))
		epochs := make([]int64, len(batch))
		for i, p := range batch {
			recs[i] = l.rec(p)
			epochs[i] = recs[i].epoch
		}
		n.spawn(func() { n.runDelete(gen, batch, recs, epochs) })
	}
	l.pendingDeletes = nil
}

// runDelete runs the delete transaction of batch and posts its result.
func (n *Node) runDelete(gen *generation, batch []int, recs []*record, epochs []int64) {
	ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
	defer cancel()
	rev, out, err := n.deleteTxn(ctx, batch, epochs, n.handoffPut(gen))
	n.post(gen, deleteDone{batch: batch, recs: recs, rev: rev, out: out, err: err})
}

// deleted handles the result of a delete transaction. A partition whose
// record has moved on since the transaction started is left alone.
func (l *loop) deleted(m deleteDone) {
	l.dirty = true
	l.wrote(m.err)
	tooLarge := l.shrinkBatch(m.err)
	for i, p := range m.batch {
		rec := m.recs[i]
		if l.rec(p) != rec {
			continue
		}
		switch {
		case tooLarge:
			l.pendingDeletes = append(l.pendingDeletes, p)
		case m.err != nil:
			wait := &record{phase: phaseDeleteWait, epoch: rec.epoch, attempts: rec.attempts + 1, handoff: rec.handoff}
			l.transition(p, wait, 0)
			if wait.attempts == 1 && !etcderr.NoSpace(m.err) {
				l.n.log.Warn("delete claim", "partition", p, "epoch", rec.epoch, "error", m.err)
			}
			retry := backoff(wait.attempts - 1)
			if etcderr.NoSpace(m.err) {
				retry = writeCheckInterval
			}
			l.n.after(l.gen, retry, deleteRetry{p: p, wait: wait})
		default:
			if rec.handoff != nil {
				l.n.report.handoffDone(rec.handoff, p)
			}
			l.fleet.SetClaim(p, m.rev, fleetview.ClaimOf(m.out[i].kv)) // no claim when the delete succeeded
			l.transition(p, idle, 0)
		}
	}
}

// retryDelete queues the deletion of p's claim again once the backoff of
// wait is over, unless p's record has moved on.
func (l *loop) retryDelete(p int, wait *record) {
	if l.rec(p) == wait {
		l.transition(p, &record{phase: phaseDeleting, epoch: wait.epoch, attempts: wait.attempts, handoff: wait.handoff}, 0)
		l.pendingDeletes = append(l.pendingDeletes, p)
	}
}
