package ownership

import (
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// launchClaims claims the partitions ps, one transaction per batch.
func (l *loop) launchClaims(ps []int) {
	n, gen := l.n, l.gen
	for _, batch := range chunks(ps, l.batch) {
		for _, p := range batch {
			l.set(p, &pstate{phase: phaseClaiming})
		}
		l.claimsInFlight++
		w := claimWrite{lease: gen.lease, since: n.clock.Now()}
		n.spawn(func() {
			ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
			defer cancel()
			rev, out, err := n.claimTxn(ctx, w, batch)
			n.post(gen, func(l *loop) { l.claimed(batch, w, rev, out, err) })
		})
	}
}

// claimed handles the result of a claim transaction.
func (l *loop) claimed(batch []int, w claimWrite, rev int64, out []outcome, err error) {
	l.claimsInFlight--
	for _, p := range batch {
		l.set(p, idle)
	}
	if err != nil {
		if l.shrinkBatch(err) {
			return
		}
		l.claimAttempt++
		l.n.log.Warn("claim partitions", "error", err, "partitions", len(batch), "attempt", l.claimAttempt)
		l.holdClaims()
		return
	}
	l.claimAttempt = 0
	for i, p := range batch {
		if !out[i].ok {
			l.n.ops.claimConflict(p)
			l.fleet.SetClaim(p, rev, fleetview.ClaimOf(out[i].kv))
			continue
		}
		// Unless the watch delivered a later state (the claim gone again),
		// the claim created at rev is ours.
		l.fleet.SetClaim(p, rev, fleetview.ClaimOf(&mvccpb.KeyValue{Value: []byte(keys.EncodeClaim(l.n.id, w.since)), CreateRevision: rev, Lease: int64(w.lease)}))
		if l.fleet.Claims[p].Epoch == rev {
			l.adopt(p, rev)
		}
	}
}

// shrinkBatch halves the batch size and reports true if err says that etcd
// refused a transaction as too large and the batch can shrink.
func (l *loop) shrinkBatch(err error) bool {
	if err == nil || !etcderr.TooManyOps(err) || l.batch <= 1 {
		return false
	}
	l.batch /= 2
	l.n.log.Warn("etcd refused a transaction as too large; halving the batch", "batch", l.batch)
	return true
}

// holdClaims stops claiming until a backoff has passed.
func (l *loop) holdClaims() {
	if l.claimHold {
		return
	}
	l.claimHold = true
	l.n.after(l.gen, backoff(l.claimAttempt-1), func(l *loop) {
		l.claimHold = false
		l.dirty = true
	})
}

// startDelete queues the deletion of p's claim at epoch; b is the handoff
// batch of a planned release, nil for any other deletion.
func (l *loop) startDelete(p int, epoch int64, b *handoff) {
	l.set(p, &pstate{phase: phaseDeleting, epoch: epoch, handoff: b})
	l.pendingDeletes = append(l.pendingDeletes, p)
}

// flushDeletes deletes the queued claims, one transaction per batch.
func (l *loop) flushDeletes() {
	if len(l.pendingDeletes) == 0 {
		return
	}
	n, gen := l.n, l.gen
	for _, batch := range chunks(l.pendingDeletes, l.batch) {
		states := make([]*pstate, len(batch))
		epochs := make([]int64, len(batch))
		for i, p := range batch {
			states[i] = l.state(p)
			epochs[i] = states[i].epoch
		}
		n.spawn(func() {
			ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
			defer cancel()
			rev, out, err := n.deleteTxn(ctx, batch, epochs)
			n.post(gen, func(l *loop) { l.deleted(batch, states, rev, out, err) })
		})
	}
	l.pendingDeletes = nil
}

// deleted handles the result of a delete transaction of the partitions of
// batch, which were in states when it started.
func (l *loop) deleted(batch []int, states []*pstate, rev int64, out []outcome, err error) {
	l.dirty = true
	tooLarge := l.shrinkBatch(err)
	for i, p := range batch {
		st := states[i]
		if l.state(p) != st {
			continue
		}
		switch {
		case tooLarge:
			l.pendingDeletes = append(l.pendingDeletes, p)
		case err != nil:
			wait := &pstate{phase: phaseDeleteWait, epoch: st.epoch, attempts: st.attempts + 1, handoff: st.handoff}
			l.set(p, wait)
			if wait.attempts == 1 {
				l.n.log.Warn("delete claim", "partition", p, "epoch", st.epoch, "error", err)
			}
			l.n.after(l.gen, backoff(wait.attempts-1), func(l *loop) {
				if l.state(p) == wait {
					l.set(p, &pstate{phase: phaseDeleting, epoch: wait.epoch, attempts: wait.attempts, handoff: wait.handoff})
					l.pendingDeletes = append(l.pendingDeletes, p)
				}
			})
		default:
			if st.handoff != nil {
				l.handedOff(st.handoff, p)
			}
			l.fleet.SetClaim(p, rev, fleetview.ClaimOf(out[i].kv)) // no claim when the delete succeeded
			l.set(p, idle)
		}
	}
}
