package ownership

import (
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// snapshot is an immutable routing table, published by the event loop.
type snapshot struct {
	self    string          // this node's ID
	gen     *generation     // the generation the snapshot was built in
	session <-chan struct{} // gen.ctx.Done()
	ring    *ring.Ring
	shape   *fleetview.Shape // the rule of key -> partition
	rev     int64            // the revision of the view of the fleet it was built from
	routes  []entry
	members []fleet.Member
	owned   []int
	closed  bool
	changed chan struct{} // closed when the next snapshot is published
}

// sessionEnded reports whether the generation the snapshot was built in
// has ended (its session lost, or the node stopping); its Local routes are
// then served no more.
func (s *snapshot) sessionEnded() bool {
	select {
	case <-s.session:
		return true
	default:
		return false
	}
}

// route returns partition p's route, for p in [0, P). It does not
// allocate.
func (s *snapshot) route(p int) fleet.Route {
	e := &s.routes[p]
	if e.route.Local && s.sessionEnded() {
		return e.unserved(s.self)
	}
	return e.route
}

// unserved returns the entry's route for a partition this node does not
// serve although it may hold (or have held) its claim: routed to the next
// owner on the ring if that is another node, else to no owner.
func (e *entry) unserved(self string) fleet.Route {
	r := e.route
	r.Local = false
	r.Owner, r.Addr, r.Epoch = "", "", 0
	if e.next != self {
		r.Owner, r.Addr = e.next, e.nextAddr
	}
	return r
}

type entry struct {
	route    fleet.Route
	rec      *record // the partition's record when published (idle in a closed snapshot)
	next     string  // owner on the ring
	nextAddr string
}

// publish builds the routing snapshot from the loop's state and publishes
// it.
func (l *loop) publish() {
	l.dirty = false
	l.store(l.build(false))
}

// publishClosed publishes the final snapshot: routes, but nothing served.
func (l *loop) publishClosed() {
	l.store(l.build(true))
}

func (l *loop) store(s *snapshot) {
	old := l.n.snap.Swap(s)
	if old != nil {
		close(old.changed)
	}
	l.n.report.published(l, s)
}

// build derives the routing table from the fleet and the partitions'
// states: every partition's route by the fleet's one rule
// (fleetview.State.Route, which Observers share), with this node's
// overlay on top: Local for what it serves, and the route of what it holds
// without serving it moved off itself (entry.unserved). It is where the
// reader's routes and members become the public fleet.Route and
// fleet.Member (struct conversions: their fields are the same).
func (l *loop) build(closed bool) *snapshot {
	f := l.fleet
	s := &snapshot{
		self:    l.n.id,
		gen:     l.gen,
		session: l.gen.ctx.Done(),
		ring:    f.Ring,
		shape:   f.Shape,
		rev:     f.Rev,
		routes:  make([]entry, f.Shape.Max()),
		closed:  closed,
		changed: make(chan struct{}),
	}
	for p := range s.routes {
		e := &s.routes[p]
		if id, ok := f.Owner(p); ok && f.Shape.Active(p) {
			e.next, e.nextAddr = id, f.Addr(id)
		}
		e.route = fleet.Route(f.Route(p))
		e.rec = l.rec(p)
		switch {
		case closed:
			e.rec = idle
			if e.route.Owner == s.self {
				e.route = e.unserved(s.self)
			}
		case e.rec.phase == phaseServing:
			e.route.Local = true
			s.owned = append(s.owned, p)
		case e.route.Owner == s.self:
			e.route = e.unserved(s.self)
		}
	}
	s.members = make([]fleet.Member, 0, len(f.All))
	for _, id := range f.All { // drained members included: they stay members
		s.members = append(s.members, fleet.Member(f.Members[id].Member))
	}
	return s
}
