package ownership

import (
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// Acquiring a partition: reconcile claims what the ring gives this node
// (launchClaims, claimed), the claim's tenure advances the fencers
// (adopt, then fencing.go), and starts (startServing): its OnAcquired is
// queued once the next snapshot is published (fireAcquired), and it
// admits work once that has returned (the starting phase, starting.go),
// or at once without the starting phase.

// launchClaims claims the partitions ps, one transaction per batch.
func (l *loop) launchClaims(ps []int) {
	n, gen := l.n, l.gen
	for _, batch := range chunks(ps, l.batch) {
		for _, p := range batch {
			if rec := l.rec(p); rec.prep != nil {
				if at := l.endPrepare(p, rec, false); !at.IsZero() {
					l.warm[p] = at
				}
			}
			l.transition(p, &record{phase: phaseClaiming}, 0)
		}
		l.claimsInFlight++
		w := claimWrite{lease: gen.lease, since: n.clock.Now(), shape: l.fleet.Shape}
		n.spawn(func() { n.runClaim(gen, w, batch) })
	}
}

// runClaim runs the claim transaction of batch and posts its result.
func (n *Node) runClaim(gen *generation, w claimWrite, batch []int) {
	ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
	defer cancel()
	rev, out, err := n.claimTxn(ctx, w, batch)
	n.post(gen, claimDone{batch: batch, w: w, rev: rev, out: out, err: err})
}

// claimed handles the result of a claim transaction.
func (l *loop) claimed(m claimDone) {
	l.claimsInFlight--
	l.wrote(m.err)
	prepared := make([]time.Time, len(m.batch))
	for i, p := range m.batch {
		l.transition(p, idle, 0)
		prepared[i] = l.warm[p]
		delete(l.warm, p)
	}
	if m.err != nil {
		if l.shrinkBatch(m.err) {
			return
		}
		l.claimAttempt++
		for _, p := range m.batch {
			l.n.trace.claimEnded(p, "claim failed")
		}
		l.n.log.Warn("claim partitions", "error", m.err, "partitions", len(m.batch), "attempt", l.claimAttempt)
		l.holdClaims()
		return
	}
	l.claimAttempt = 0
	for i, p := range m.batch {
		if !m.out[i].ok {
			l.n.trace.claimEnded(p, "claim not made")
			if m.out[i].kv == nil {
				// Unclaimed: the node's shape of the fleet was stale. A
				// prepared partition stays prepared for the next claim.
				l.awaitShape(m.out[i].seen, m.w.shape)
				if !prepared[i].IsZero() {
					l.warm[p] = prepared[i]
				}
				continue
			}
			c := fleetview.ClaimOf(m.out[i].kv)
			if c.Owner != l.n.id || c.Lease != m.w.lease { // else handed over to this node meanwhile
				l.n.report.claimConflict(p)
			}
			l.fleet.SetClaim(p, m.rev, c)
			continue
		}
		l.shapeRefusals = 0
		// Unless the watch delivered a later state (the claim gone again),
		// the claim created at rev is ours.
		l.fleet.SetClaim(p, m.rev, fleetview.ClaimOf(&mvccpb.KeyValue{Value: []byte(keys.EncodeClaim(l.n.id, m.w.since)), CreateRevision: m.rev, ModRevision: m.rev, Lease: int64(m.w.lease)}))
		if l.fleet.Claims[p].Epoch == m.rev {
			l.adopt(p, m.rev, prepared[i], m.w.shape)
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

// holdClaims stops claiming until a backoff has passed (resumeClaims).
func (l *loop) holdClaims() {
	if l.claimHold {
		return
	}
	l.claimHold = true
	l.n.after(l.gen, backoff(l.claimAttempt-1), claimHoldOver{})
}

// resumeClaims ends the backoff of holdClaims.
func (l *loop) resumeClaims() {
	l.claimHold = false
	l.dirty = true
}

// adopt starts a tenure over p under the claim created at epoch, prepared
// at prepared (zero if not): its fencers are advanced (fencing.go) before
// it serves.
//
// claimedIn is the shape the claim was made in (nil if unknown): if the
// resize of the partition count it was made in has ended since, the
// partitions it replaced are retired all the same.
func (l *loop) adopt(p int, epoch int64, prepared time.Time, claimedIn *fleetview.Shape) {
	m := claimedIn
	delete(l.handed, p)
	if !l.mine(p) {
		l.startDelete(p, epoch, nil)
		return
	}
	t := newTenure(l.gen, l.n.slots.at(p), p, epoch, l.n.cfg.Signer)
	t.prepared = prepared
	t.count = l.fleet.Shape.Count(p)
	t.retire = retireTokens(l.fleet.Shape, p)
	if len(t.retire) == 0 && m != nil {
		t.retire = retireTokens(m, p)
	}
	l.transition(p, &record{phase: phaseFencing, t: t}, 0)
	if len(l.n.cfg.Fencers) == 0 {
		l.startServing(t)
		return
	}
	l.pendingFences = append(l.pendingFences, t)
}

// startServing starts t, whose fencers have been advanced: it enters the
// starting phase, which admits work once t's OnAcquired has returned, or,
// without it, serves at once.
func (l *loop) startServing(t *tenure) {
	ph := phaseServing
	if l.n.startsFirst() {
		ph = phaseStarting
	}
	l.transition(t.p, &record{phase: ph, t: t}, 0)
}

// fireAcquired queues OnAcquired for the tenures that were fenced, and
// counts and logs their acquisition, once the next snapshot is published.
// In the starting phase, that snapshot does not show them served: Lookup
// reports them Local, and Hold admits work, once their OnAcquired has
// returned or the acquired timeout, which starts now, has passed (see
// starting.go). Without it, when OnAcquired runs, Lookup reports the
// partition Local and Hold admits work. A tenure that has already ended by
// then still gets its OnAcquired, and its OnReleased after it.
func (l *loop) fireAcquired() {
	if len(l.acquiredQ) == 0 {
		return
	}
	var starting []*tenure
	for _, a := range l.acquiredQ {
		l.n.fireAcquired(l.gen, a.t)
		if rec := l.rec(a.t.p); rec.t == a.t && rec.phase == phaseStarting {
			starting = append(starting, a.t)
		}
	}
	if len(starting) > 0 {
		l.n.after(l.gen, l.n.cfg.AcquiredTimeout, acquiredTimeout{ts: starting})
	}
	l.n.report.acquired(l.acquiredQ, leaseString(l.gen))
	clear(l.acquiredQ)
	l.acquiredQ = l.acquiredQ[:0]
}

// flushAcquired publishes and queues the pending OnAcquired callbacks. It
// runs before any tenure's end is reported, so that OnAcquired always
// precedes OnReleased.
func (l *loop) flushAcquired() {
	if len(l.acquiredQ) > 0 {
		l.publish()
		l.fireAcquired()
	}
}
