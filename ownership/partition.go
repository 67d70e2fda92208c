package ownership

import "sync/atomic"

// phase is where one partition is in its lifecycle on this node:
//
//	idle -> claiming -> fencing (-> fenceWait -> fencing ...) -> serving
//	claiming -> idle (the claim failed, or another node holds it)
//	idle -> deleting (a claim left by an earlier session of this node)
//	serving -> draining (admits nothing; work in flight finishes) ->
//	  releasing (context cancelled, OnReleased) -> deleting (-> deleteWait ...) -> idle
//	fencing, when the tenure ends -> aborting -> deleting (or idle if the claim is gone)
//	fenceWait, when the tenure ends -> deleting (or idle if the claim is gone)
//	serving or draining, when the claim disappears -> idle (cancelled at once)
//	any, on loss -> idle (the claims go with the lease)
type phase uint8

const (
	phaseIdle       phase = iota // nothing of ours in flight
	phaseClaiming                // claim transaction in flight
	phaseFencing                 // claim held; fencers running
	phaseFenceWait               // fencers failed; waiting to retry
	phaseAborting                // the tenure ended while its fencers ran; delete the claim when they return
	phaseServing                 // admitting work
	phaseDraining                // handing off: admitting no work; waiting for the work in flight, its context still live
	phaseReleasing               // handed off: context cancelled, OnReleased queued; waiting for it to return
	phaseDeleting                // claim deletion queued or in flight
	phaseDeleteWait              // claim deletion failed; waiting to retry
)

// pstate is one partition's state on this node. A published pstate is
// immutable: every change publishes a new one, so that a reader that holds
// one can tell, by comparing pointers, whether the partition has moved on.
type pstate struct {
	phase    phase
	t        *tenure  // fencing to releasing: the tenure; nil otherwise
	epoch    int64    // deleting, deleteWait: the epoch of the claim to delete
	attempts int      // failed fencing or deletion attempts in a row
	reason   Reason   // draining: why the tenure is ending (moved or closed)
	handoff  *handoff // draining to deleteWait: the batch a planned release belongs to; nil otherwise
}

var idle = &pstate{}

// served reports whether the partition's tenure has started serving and
// OnAcquired was queued for it (its OnReleased may be due).
func (s *pstate) served() bool { return s.phase == phaseServing || s.phase == phaseDraining }

// releasing reports whether this node is handing the partition off: it
// still holds (or is deleting) its claim but admits no new work.
func (s *pstate) releasing() bool {
	switch s.phase {
	case phaseDraining, phaseReleasing, phaseDeleting, phaseDeleteWait:
		return true
	}
	return false
}

// slot holds one partition's current state: the one place where it is
// stored. The event loop writes it; Hold and in-flight work read it, from
// any goroutine.
type slot struct{ cur atomic.Pointer[pstate] }

// load returns the partition's state.
func (s *slot) load() *pstate {
	if st := s.cur.Load(); st != nil {
		return st
	}
	return idle
}

// serving reports whether t is the partition's tenure and serving.
func (s *slot) serving(t *tenure) bool {
	st := s.load()
	return st.t == t && st.phase == phaseServing
}

// state returns partition p's state.
func (l *loop) state(p int) *pstate { return l.n.slots[p].load() }

// set publishes st as partition p's state. A partition whose new state
// is no longer in its handoff batch leaves the batch.
func (l *loop) set(p int, st *pstate) {
	old := l.state(p)
	l.n.slots[p].cur.Store(st)
	l.dirty = true
	if b := old.handoff; b != nil && st.handoff != b {
		l.leftHandoff(b)
	}
}

// stopAdmitting publishes st (draining) as partition p's state: p's
// tenure admits no more work, but its context stays live until the work
// already admitted has finished (see drain). The order matters: the
// tenure's admission (tenure.enter) re-reads the state after it counts the
// work, so once st is published, no new work is admitted and the drain sees
// all work admitted before.
func (l *loop) stopAdmitting(p int, st *pstate) {
	l.set(p, st)
	st.t.stop()
}

// end publishes st as partition p's state and then ends p's current tenure
// for reason r, cancelling its context at once (as stopAdmitting, then the
// cancellation).
func (l *loop) end(p int, st *pstate, r Reason) {
	t := l.state(p).t
	l.set(p, st)
	if t != nil {
		t.finish(r)
	}
}
