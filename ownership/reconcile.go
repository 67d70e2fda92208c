package ownership

import "time"

// mine reports whether this node should hold partition p now.
func (l *loop) mine(p int) bool {
	return !l.closing && l.me >= 0 && l.fleet.Ring.OwnerIndex(p) == l.me
}

// reconcile moves every partition towards what the ring and the claims
// say: claim what is mine and free, hand off what is no longer mine.
func (l *loop) reconcile() {
	var toClaim []int
	canClaim := !l.claimHold && !l.resyncing && l.lost == nil
	for p := range l.n.slots {
		st := l.state(p)
		switch st.phase {
		case phaseIdle:
			c := l.fleet.Claims[p]
			switch {
			case c.Epoch != 0 && c.Owner == l.n.id && c.Lease == l.gen.lease:
				// Ours, without a tenure: a claim transaction whose
				// response was lost but which committed.
				l.adopt(p, c.Epoch)
			case c.Epoch != 0 && c.Owner == l.n.id:
				// Left by an earlier session of this node, whose work has
				// been cancelled.
				l.startDelete(p, c.Epoch, nil)
			case c.Epoch == 0 && canClaim && l.mine(p):
				toClaim = append(toClaim, p)
			}
		case phaseFencing:
			if !l.mine(p) {
				l.end(p, &pstate{phase: phaseAborting, t: st.t}, ReasonMoved)
			}
		case phaseFenceWait:
			if !l.mine(p) {
				l.end(p, idle, ReasonMoved)
				l.startDelete(p, st.t.token.Epoch, nil)
			}
		case phaseServing:
			if !l.mine(p) {
				l.release(p)
			}
		}
	}
	if len(toClaim) > 0 {
		l.launchClaims(toClaim)
	}
	l.flushReleases()
	l.flushDeletes()
	l.flushFences()
}

// adopt starts a tenure over p under the claim created at epoch.
func (l *loop) adopt(p int, epoch int64) {
	if !l.mine(p) {
		l.startDelete(p, epoch, nil)
		return
	}
	t := newTenure(l.gen.ctx, l.gen.sess, &l.n.slots[p], p, epoch, l.n.cfg.Signer)
	l.set(p, &pstate{phase: phaseFencing, t: t})
	if len(l.n.cfg.Fencers) == 0 {
		l.serveTenure(t)
		return
	}
	l.pendingFences = append(l.pendingFences, t)
}

// serveTenure starts admitting work under t.
func (l *loop) serveTenure(t *tenure) {
	l.set(t.p, &pstate{phase: phaseServing, t: t})
	l.acquiredQ = append(l.acquiredQ, t)
}

// holds reports whether partition p's known claim is t's.
func (l *loop) holds(p int, t *tenure) bool {
	c := l.fleet.Claims[p]
	return c.Epoch == t.token.Epoch && c.Owner == l.n.id && c.Lease == l.gen.lease
}

// checkTenure ends p's tenure if its claim is gone (deleted by someone
// else, or expired with a lease). The fleet state calls it whenever p's
// claim changes.
func (l *loop) checkTenure(p int) {
	l.dirty = true
	st := l.state(p)
	t := st.t
	if t == nil || l.holds(p, t) {
		return
	}
	switch st.phase {
	case phaseFencing:
		l.end(p, &pstate{phase: phaseAborting, t: t}, ReasonLost)
	case phaseFenceWait:
		l.end(p, idle, ReasonLost)
	case phaseServing, phaseDraining:
		// A loss, even in the middle of a handoff: the work in flight is
		// cancelled at once, the next owner may be serving already. What
		// deleted the claim is told once classify knows.
		l.end(p, idle, ReasonLost)
		l.flushAcquired()
		l.n.fireReleased(t)
		l.vanished = append(l.vanished, t)
	}
}

// fireAcquired queues OnAcquired for the tenures that started serving, once
// the snapshot that shows them served is published: when OnAcquired runs,
// Lookup reports the partition Local and Hold admits work. A tenure that
// has already ended by then still gets its OnAcquired, and its OnReleased
// after it.
func (l *loop) fireAcquired() {
	if len(l.acquiredQ) == 0 {
		return
	}
	for _, t := range l.acquiredQ {
		l.n.fireAcquired(t)
	}
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

// release hands p off: it stops admitting work for p, and the drain (on
// another goroutine) waits for the work in flight; drained then cancels
// the tenure's context.
func (l *loop) release(p int) {
	l.flushAcquired()
	r := ReasonMoved
	if l.closing {
		r = ReasonClosed
	}
	if l.handoff == nil {
		l.handoff = &handoff{reason: r, stopped: l.n.clock.Now()}
	}
	l.handoff.pending++
	t := l.state(p).t
	l.stopAdmitting(p, &pstate{phase: phaseDraining, t: t, reason: r, handoff: l.handoff})
	l.releaseQ = append(l.releaseQ, t)
}

// drained handles the end of the drains of ts (expired: the drain timeout
// passed with work still in flight): each tenure still draining has its
// context cancelled and gets its OnReleased; its claim is deleted once that
// has returned (see Node.awaitReleased), or at once if the drain timed
// out.
func (l *loop) drained(ts []*tenure, deadline time.Time, expired bool) {
	var done []*tenure
	var last <-chan struct{}
	for _, t := range ts {
		st := l.state(t.p)
		if st.t != t || st.phase != phaseDraining {
			continue // lost meanwhile
		}
		l.end(t.p, &pstate{phase: phaseReleasing, t: t, handoff: st.handoff}, st.reason)
		if ack := l.n.fireReleased(t); ack != nil {
			last = ack // callbacks run in order: the last one returns last
		}
		done = append(done, t)
	}
	if len(done) == 0 {
		return
	}
	if expired || last == nil {
		l.released(done)
		return
	}
	n, gen := l.n, l.gen
	n.spawn(func() { n.awaitReleased(gen, done, last, deadline) })
}

// released deletes the claims of the handed-off tenures ts whose
// OnReleased has returned.
func (l *loop) released(ts []*tenure) {
	for _, t := range ts {
		if st := l.state(t.p); st.t == t && st.phase == phaseReleasing {
			l.startDelete(t.p, t.token.Epoch, st.handoff)
		}
	}
}
