package ownership

import "time"

// mine reports whether this node should hold partition p now.
func (l *loop) mine(p int) bool {
	if l.closing || !l.fleet.Shape.Active(p) || l.fleet.Shape.Leaving(p) {
		return false
	}
	owner, ok := l.fleet.Owner(p)
	return ok && owner == l.n.id
}

// reconcile moves every partition towards what the ring and the claims
// say: claim what is mine and free, hand off what is no longer mine.
func (l *loop) reconcile() {
	var toClaim []int
	canClaim := !l.claimHold && !l.resyncing && l.lost == nil && l.shapeReached(l.shapeWait)
	canPrepare := l.n.prepares() && !l.closing && !l.resyncing && l.lost == nil
	l.started = nil
	for p := range l.n.slots.len() {
		rec := l.rec(p)
		switch rec.phase {
		case phaseIdle:
			c := l.fleet.Claims[p]
			if c.Epoch != 0 && len(l.warm) > 0 {
				delete(l.warm, p) // claimed meanwhile: what was prepared is for an earlier holder
			}
			switch {
			case c.Epoch != 0 && c.Owner == l.n.id && c.Lease == l.gen.lease:
				// Ours, without a tenure: handed over to this node by its
				// holder (handover.go), or a claim transaction whose
				// response was lost but which committed.
				if l.mine(p) || l.graceOver(p, c.Epoch) {
					l.adopt(p, c.Epoch, time.Time{}, nil)
				}
			case c.Epoch != 0 && c.Owner == l.n.id:
				// Left by an earlier session of this node, whose work has
				// been cancelled.
				l.startDelete(p, c.Epoch, nil)
			case c.Epoch == 0 && canClaim && l.mine(p):
				toClaim = append(toClaim, p)
			case c.Epoch != 0 && c.Owner != l.n.id && canPrepare && l.mine(p):
				// Another node serves it: prepare while it does.
				l.startPrepare(p, c)
			}
		case phasePreparing, phaseReady:
			if l.reconcilePrepare(p, rec, canClaim) {
				toClaim = append(toClaim, p)
			}
		case phaseFencing:
			if !l.mine(p) && !l.awaitsSuccessor(p, rec) {
				l.transition(p, &record{phase: phaseAborting, t: rec.t}, reasonMoved)
			}
		case phaseFenceWait:
			if !l.mine(p) {
				l.transition(p, idle, reasonMoved)
				l.startDelete(p, rec.t.token.Epoch, nil)
			}
		case phaseStarting:
			if !l.mine(p) && !l.awaitsSuccessor(p, rec) && l.mayRelease() {
				// Moved away before its OnAcquired returned: it has admitted
				// no work, so it is handed off as soon as the successor is
				// ready (warm.go), without a prepare phase of its own (its
				// OnReleased follows its OnAcquired).
				l.release(p, nil, false)
			}
		case phaseServing:
			switch {
			case !l.mine(p):
				l.moveAway(p, rec)
			case rec.move != nil:
				l.keepServing(p, rec)
			}
		}
	}
	l.releaseMoves()
	if len(toClaim) > 0 {
		l.launchClaims(toClaim)
	}
	l.flushWriteCheck()
	l.moveGroups()
	l.flushReleases()
	l.flushDeletes()
	l.flushFences()
	l.flushReady()
}

// holds reports whether partition p's known claim is t's.
func (l *loop) holds(p int, t *tenure) bool {
	c := l.fleet.Claims[p]
	return c.Epoch == t.token.Epoch && c.Owner == l.n.id && c.Lease == l.gen.lease
}
