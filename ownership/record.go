package ownership

import "sync/atomic"

// phase is where one partition is in its lifecycle on this node:
//
//	idle -> preparing (-> ready) -> claiming (the ring moves p here while another node holds it; see prepare.go)
//	preparing or ready -> idle (the move called off)
//	idle -> claiming -> fencing (-> fenceWait -> fencing ...) -> starting -> serving
//	fencing -> serving (without the starting phase: Config.AcquiredTimeout negative, or no OnAcquired)
//	claiming -> idle (the claim failed, or another node holds it)
//	idle -> deleting (a claim left by an earlier session of this node)
//	starting -> draining (the ring moved p away, or the node closes, before OnAcquired returned)
//	serving -> serving with a move (the ring moved p away; waiting for the successor's preparation, see warm.go) -> draining
//	serving -> draining (admits nothing; work in flight finishes) ->
//	  releasing (context cancelled, OnReleased) -> deleting (-> deleteWait ...) -> idle
//	fencing, when the tenure ends -> aborting -> deleting (or idle if the claim is gone)
//	fenceWait, when the tenure ends -> deleting (or idle if the claim is gone)
//	starting, serving or draining, when the claim disappears -> idle (cancelled at once)
//	any, on loss -> idle (the claims go with the lease)
type phase uint8

const (
	phaseIdle       phase = iota // nothing of ours in flight
	phasePreparing               // another node holds it; the ring gives it to this node: OnPrepare running
	phaseReady                   // prepared (or the preparation failed): readiness put, waiting for the holder's claim to go
	phaseClaiming                // claim transaction in flight
	phaseFencing                 // claim held; fencers running
	phaseFenceWait               // fencers failed; waiting to retry
	phaseAborting                // the tenure ended while its fencers ran; delete the claim when they return
	phaseStarting                // fenced; OnAcquired queued or running: admits no work until it has returned (or Config.AcquiredTimeout passed)
	phaseServing                 // admitting work
	phaseDraining                // handing off: admitting no work; waiting for the work in flight, its context still live
	phaseReleasing               // handed off: context cancelled, OnReleased queued; waiting for it to return
	phaseDeleting                // claim deletion queued or in flight
	phaseDeleteWait              // claim deletion failed; waiting to retry
)

// record is one partition's state on this node: the one record of it,
// kept in the partition's slot and published, as it is, in the routing
// snapshot. A record is immutable: every change is a new record, made by
// loop.transition, so that a reader that holds one can tell, by comparing
// pointers, whether the partition has moved on.
type record struct {
	phase    phase
	t        *tenure      // fencing to releasing: the tenure; nil otherwise
	epoch    int64        // deleting, deleteWait: the epoch of the claim to delete
	attempts int          // failed fencing or deletion attempts in a row
	handoff  *handoff     // serving with a move, draining to deleteWait: the batch of a planned release (and its reason); nil otherwise
	direct   bool         // deleting, deleteWait: delete the claim, hand it over to no one (a hand-over was refused, or a deletion failed)
	prep     *preparation // preparing, ready: this node's preparation
	move     *move        // serving: the planned move away that waits for the successor's preparation; nil otherwise
}

var idle = &record{}

// served reports whether the partition's tenure has been fenced and its
// OnAcquired queued (or is due to be: see loop.acquiredQ), so that its
// OnReleased is due when it ends.
func (r *record) served() bool {
	return r.phase == phaseStarting || r.phase == phaseServing || r.phase == phaseDraining
}

// acquired reports whether the partition's tenure has been fenced and has
// not begun its handoff: starting or serving.
func (r *record) acquired() bool { return r.phase == phaseStarting || r.phase == phaseServing }

// releasing reports whether this node is handing the partition off: it
// still holds (or is deleting) its claim but admits no new work.
func (r *record) releasing() bool {
	switch r.phase {
	case phaseDraining, phaseReleasing, phaseDeleting, phaseDeleteWait:
		return true
	}
	return false
}

// slot holds one partition's current record. The event loop writes it
// (loop.transition); the admission of work (tenure.enter) reads it, from
// any goroutine.
type slot struct{ cur atomic.Pointer[record] }

// slotTable is the partitions' slots, by partition number. The event loop
// alone grows it (a resize of the partition count); any goroutine reads
// it. A slot, once made, stays the partition's for the node's life.
type slotTable struct{ v atomic.Pointer[[]*slot] }

// unused is the slot of a partition number beyond the table: always idle.
var unused = &slot{}

// at returns partition p's slot; for p beyond the table, an idle slot
// that is nobody's.
func (st *slotTable) at(p int) *slot {
	if v := st.v.Load(); v != nil && uint(p) < uint(len(*v)) {
		return (*v)[p]
	}
	return unused
}

// len returns the number of slots.
func (st *slotTable) len() int {
	if v := st.v.Load(); v != nil {
		return len(*v)
	}
	return 0
}

// grow makes slots for the partition numbers below n. Only the event loop
// (or Join, before it starts) calls it.
func (st *slotTable) grow(n int) {
	old := st.v.Load()
	var cur []*slot
	if old != nil {
		cur = *old
	}
	if n <= len(cur) {
		return
	}
	next := make([]*slot, n)
	copy(next, cur)
	for p := len(cur); p < n; p++ {
		next[p] = &slot{}
	}
	st.v.Store(&next)
}

// load returns the partition's record.
func (s *slot) load() *record {
	if r := s.cur.Load(); r != nil {
		return r
	}
	return idle
}

// serving reports whether t is the partition's tenure and serving.
func (s *slot) serving(t *tenure) bool {
	r := s.load()
	return r.t == t && r.phase == phaseServing
}

// rec returns partition p's record.
func (l *loop) rec(p int) *record { return l.n.slots.at(p).load() }

// transition moves partition p to the record to: the one way a record
// changes. It stores to, marks the routing snapshot out of date, and does
// what the edge from the current record to to means:
//
//   - from fencing into starting, or into serving without the starting
//     phase: the tenure's acquisition is queued (OnAcquired, the
//     acquisition metric and log line, once the next snapshot is
//     published; see loop.fireAcquired);
//   - starting to serving: the tenure admits work from now on; if its
//     OnAcquired has not returned (Config.AcquiredTimeout passed), the
//     early admission is queued for its metric and log line (see
//     loop.admit);
//   - serving (or starting) to draining: the tenure admits no more work;
//     its context stays live until the work already admitted has finished
//     (see drain). The order matters: the tenure's admission
//     (tenure.enter) re-reads the record after it counts the work, so
//     once to is stored, no new work is admitted and the drain sees all
//     work admitted before;
//   - end not zero: the current tenure ends for end (its context cancelled;
//     a tenure whose end was recorded before keeps that reason);
//   - a served tenure that leaves starting, serving and draining: its
//     OnReleased and release metric, once, after the pending OnAcquired
//     callbacks. The returned channel is closed when that OnReleased has
//     returned (nil if there is none, or no served tenure ended);
//   - out of a handoff batch: the batch loses the partition, and is logged
//     once its last partition has left.
func (l *loop) transition(p int, to *record, end reason) (released <-chan struct{}) {
	from := l.rec(p)
	l.n.slots.at(p).cur.Store(to)
	l.n.trace.edge(l, p, from, to, end)
	l.dirty = true
	t := from.t
	switch {
	case from.phase == phaseFencing && (to.phase == phaseStarting || to.phase == phaseServing):
		l.acquiredQ = append(l.acquiredQ, l.n.report.acquisition(to.t))
	case from.phase == phaseStarting && to.phase == phaseServing:
		if !t.acquiredReturned.Load() {
			l.earlyQ = append(l.earlyQ, t)
		}
	case from.acquired() && to.phase == phaseDraining:
		t.stop()
	}
	if end != 0 && t != nil {
		t.finish(end)
	}
	if from.served() && !to.served() {
		l.flushAcquired()
		released = l.n.fireReleased(t)
	}
	if b := from.handoff; b != nil && to.handoff != b {
		l.leftHandoff(b)
	}
	if to.phase != phaseFencing && to.phase != phaseFenceWait {
		l.n.report.rewindOver(p)
	}
	return released
}
