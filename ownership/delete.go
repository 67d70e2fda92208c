package ownership

import (
	"time"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
)

// Deleting a claim: the last stage of a handoff, and the clean-up of a
// claim left by an earlier session of this node or by a tenure that ended
// before it served. startDelete queues it, flushDeletes batches the queued
// deletions into transactions, deleted handles their results. The claim
// of a planned release is handed over to the next owner instead, in the
// same transactions, when the fleet allows it (handover.go).

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
	var specRev int64
	if s := l.fleet.Shape; s != nil {
		specRev = s.SpecRev
	}
	since := n.clock.Now()
	for _, batch := range chunks(l.pendingDeletes, l.batch) {
		recs := make([]*record, len(batch))
		epochs := make([]int64, len(batch))
		to := make([]successor, len(batch))
		for i, p := range batch {
			recs[i] = l.rec(p)
			epochs[i] = recs[i].epoch
			to[i] = l.handTo(p, recs[i])
		}
		n.spawn(func() { n.runDelete(gen, batch, recs, epochs, to, specRev, since) })
	}
	l.pendingDeletes = nil
}

// runDelete runs the delete transaction of batch (handing the claims over
// to their successors to, if any) and posts its result.
func (n *Node) runDelete(gen *generation, batch []int, recs []*record, epochs []int64, to []successor, specRev int64, since time.Time) {
	ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
	defer cancel()
	rev, out, err := n.deleteTxn(ctx, batch, epochs, to, specRev, since, n.handoffPut(gen))
	n.post(gen, deleteDone{batch: batch, recs: recs, to: to, since: since, rev: rev, out: out, err: err})
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
			wait := &record{phase: phaseDeleteWait, epoch: rec.epoch, attempts: rec.attempts + 1, handoff: rec.handoff, direct: true}
			l.transition(p, wait, 0)
			if wait.attempts == 1 && !etcderr.NoSpace(m.err) {
				l.n.log.Warn("delete claim", "partition", p, "epoch", rec.epoch, "error", m.err)
			}
			retry := backoff(wait.attempts - 1)
			if etcderr.NoSpace(m.err) {
				retry = writeCheckInterval
			}
			l.n.after(l.gen, retry, deleteRetry{p: p, wait: wait})
		case m.to[i].id != "" && m.out[i].ok:
			l.handedOver(p, rec, m.to[i], m.rev, m.since)
		case m.to[i].id != "" && l.stillMine(m.out[i].kv, rec.epoch):
			l.handoverRefused(p, rec, m.to[i])
		default:
			if m.out[i].ok {
				l.n.trace.wrote(p, m.rev, "")
			}
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
		l.transition(p, &record{phase: phaseDeleting, epoch: wait.epoch, attempts: wait.attempts, handoff: wait.handoff, direct: true}, 0)
		l.pendingDeletes = append(l.pendingDeletes, p)
	}
}
