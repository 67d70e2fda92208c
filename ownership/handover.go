package ownership

import (
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// Handing a claim over: the last stage of a planned release, once the
// partition is drained and its OnReleased has returned, when the fleet
// requires the handover feature. Instead of deleting its claim and leaving
// the successor to see the deletion and create its own, the holder puts
// the claim, in the transaction that would have deleted it, with the
// successor's ID and bound to the successor's lease, if its own claim
// still stands at its epoch, the successor's member key is still bound to
// that lease and the spec is unchanged (deleteTxn). The claim's epoch is
// its ModRevision (keys.ClaimEpoch): the transaction's revision, above the
// holder's. The successor serves once it sees the claim, its own ID and
// lease, and has raised its fencers (reconcile's adopt): one etcd write on
// the move's critical path. A refused hand-over (the successor left, or
// its lease ended) falls back to deleting the claim; a crash is still a
// failover.
//
// The successor's view of the fleet is a consistent cut (one watch, in
// revision order), so when it sees the claim handed to it, it holds every
// change the holder's decision saw; the fleet may still have changed
// since the holder decided (a join, a pin), so that the view does not give
// the successor the partition: such a claim is kept, unserved, for
// handedGrace before the node deletes it, so that a change undone at once
// (a process restarting) costs no second move.
//
// A build that reads a claim's epoch as its CreateRevision must not meet a
// handed-over claim, so the holder hands over only once the spec requires
// the handover feature, which refuses such builds at Join. The holder of a
// planned release that sees every live member publish the feature records
// it (fleetview.RequireFeature, once per generation); its own releases go
// by deletion until the spec shows it.

// handsOver reports whether this node hands its planned releases over:
// its build and the fleet's spec both have the handover feature.
func (l *loop) handsOver() bool {
	return fleetview.Has(l.fleet.Spec.Requires, fleetview.FeatureHandover) &&
		fleetview.Has(l.n.cfg.buildFeatures(), fleetview.FeatureHandover)
}

// handTo returns the successor the claim of p (rec, queued for deletion)
// is handed over to: for a planned release whose hand-over has not been
// refused, the node the ring gives p (without this node, if it closes),
// with its member's lease, outside a resize; the zero successor otherwise.
func (l *loop) handTo(p int, rec *record) successor {
	if rec.handoff == nil || rec.direct {
		return successor{}
	}
	if !l.handsOver() {
		l.askHandover()
		return successor{}
	}
	if s := l.fleet.Shape; s == nil || s.Resize != nil || !s.Active(p) {
		return successor{}
	}
	id, ok := l.fleet.Owner(p)
	if l.closing && id == l.n.id { // its view may not show its member key deleted yet
		id, ok = l.fleet.OwnerWithout(p, l.n.id)
	}
	if !ok || id == l.n.id {
		return successor{}
	}
	m, ok := l.fleet.Members[id]
	if !ok || m.Lease == 0 {
		return successor{}
	}
	return successor{id: id, lease: m.Lease, prepares: m.Member.Prepares}
}

// askHandover records the handover feature in the fleet's spec, on a
// goroutine of its own, once per generation, if this build and every live
// member the node knows publish it.
func (l *loop) askHandover() {
	if l.handoverAsked || !fleetview.Has(l.n.cfg.buildFeatures(), fleetview.FeatureHandover) {
		return
	}
	for _, m := range l.fleet.Members {
		if !fleetview.Has(m.Member.Features, fleetview.FeatureHandover) {
			return
		}
	}
	l.handoverAsked = true
	n, gen := l.n, l.gen
	n.spawn(func() {
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		defer cancel()
		if _, err := fleetview.RequireFeature(ctx, n.cli, n.layout, fleetview.FeatureHandover); err != nil {
			if gen.ctx.Err() == nil {
				n.log.Info("record the handover feature: planned moves delete their claims", "error", err)
			}
			return
		}
		n.log.Info("the fleet requires the handover feature: planned moves hand their claims over")
	})
}

// handedOver handles the hand-over of p's claim (rec) to s at rev.
func (l *loop) handedOver(p int, rec *record, s successor, rev int64, since time.Time) {
	l.n.trace.wrote(p, rev, s.id)
	rec.handoff.handed++
	l.n.report.handoffDone(rec.handoff, p)
	l.fleet.SetClaim(p, rev, fleetview.ClaimOf(&mvccpb.KeyValue{Value: []byte(keys.EncodeClaim(s.id, since)), CreateRevision: rev, ModRevision: rev, Lease: int64(s.lease)}))
	l.transition(p, idle, 0)
}

// stillMine reports whether kv, p's claim as a refused transaction read
// it, is still this node's at epoch.
func (l *loop) stillMine(kv *mvccpb.KeyValue, epoch int64) bool {
	return kv != nil && keys.ClaimEpoch(kv) == epoch && keys.DecodeClaim(kv.Value).Node == l.n.id
}

// handoverRefused queues the deletion of p's claim (rec), whose hand-over
// to s etcd refused: s left or its lease changed, or the spec changed.
func (l *loop) handoverRefused(p int, rec *record, s successor) {
	l.n.log.Debug("hand-over refused: deleting the claim", "partition", p, "epoch", rec.epoch, "successor", s.id)
	l.transition(p, &record{phase: phaseDeleting, epoch: rec.epoch, handoff: rec.handoff, direct: true}, 0)
	l.pendingDeletes = append(l.pendingDeletes, p)
}

// handedGrace is how long a node keeps a claim handed over to it that its
// view of the fleet does not give it, unserved, before it deletes it.
const handedGrace = 500 * time.Millisecond

// handedClaim is a claim handed over to this node at epoch that its view
// did not give it; over once handedGrace has passed.
type handedClaim struct {
	epoch int64
	over  bool
}

// graceOver reports whether the claim of p at epoch, this node's and not
// given it by its view, has been kept for handedGrace; it starts the wait
// if not.
func (l *loop) graceOver(p int, epoch int64) bool {
	h, ok := l.handed[p]
	if ok && h.epoch == epoch {
		return h.over
	}
	l.handed[p] = handedClaim{epoch: epoch}
	l.n.after(l.gen, handedGrace, handedGraceOver{p: p, epoch: epoch})
	return false
}

// handedGraceOver ends the grace of the claim of p at epoch.
type handedGraceOver struct {
	p     int
	epoch int64
}

func (m handedGraceOver) deliver(l *loop) {
	if h, ok := l.handed[m.p]; ok && h.epoch == m.epoch {
		l.handed[m.p] = handedClaim{epoch: m.epoch, over: true}
		l.dirty = true
	}
}
