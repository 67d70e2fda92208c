package ownership

import (
	"context"
	"time"
)

// Member is a node registered in the cluster, as published in its member
// key.
type Member struct {
	// ID is the node ID.
	ID string
	// Addr is the node's advertised address, possibly empty.
	Addr string
	// Meta is the node's published metadata, possibly nil.
	Meta map[string]string
}

// Route says where the work for one partition goes, as a Node or an
// Observer currently sees it.
type Route struct {
	// Partition is the key's partition.
	Partition int
	// Owner is the node that holds the partition's claim or, if nobody holds
	// one, the node the ring assigns it to, which is about to claim it.
	// Empty if unknown (no members).
	Owner string
	// Addr is Owner's advertised address, empty if unknown.
	Addr string
	// Epoch is the epoch of Owner's claim, 0 if the partition is unclaimed.
	Epoch int64
	// Since is when Owner created its claim, by Owner's clock (informational:
	// the epoch, not the time, orders tenures). Zero if the partition is
	// unclaimed or the claim was written by a build that did not record it.
	Since time.Time
	// Local reports that this node holds the claim and serves the
	// partition: its fencers have been advanced and no handoff has begun.
	// Hold may still refuse a Local partition if its tenure ends in between.
	// Always false in an Observer's routes.
	//
	// A Node's route names the node itself as Owner only when Local: a
	// partition it is still acquiring, is handing off, or held before its
	// session was lost is routed to its next owner on the ring if that is
	// another node, else to no owner (Owner empty, Epoch 0).
	Local bool
	// RingVersion is the Version of the ring the route was computed from.
	RingVersion uint64
}

// snapshot is an immutable routing table, published by the event loop.
type snapshot struct {
	self    string          // this node's ID
	gen     context.Context // the context of the generation the snapshot was built in
	session <-chan struct{} // gen.Done()
	ring    *Ring
	routes  []entry
	members []Member
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
func (s *snapshot) route(p int) Route {
	e := &s.routes[p]
	if e.route.Local && s.sessionEnded() {
		return e.unserved(s.self)
	}
	return e.route
}

// unserved returns the entry's route for a partition this node does not
// serve although it may hold (or have held) its claim: routed to the next
// owner on the ring if that is another node, else to no owner.
func (e *entry) unserved(self string) Route {
	r := e.route
	r.Local = false
	r.Owner, r.Addr, r.Epoch = "", "", 0
	if e.next != self {
		r.Owner, r.Addr = e.next, e.nextAddr
	}
	return r
}

type entry struct {
	route    Route
	serving  *pstate // the partition's state when published, if serving
	t        *tenure // serving's tenure
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
	l.n.ops.published(l, old, s)
}

// build derives the routing table from the fleet and the partitions'
// states.
func (l *loop) build(closed bool) *snapshot {
	f := l.fleet
	s := &snapshot{
		self:    l.n.id,
		gen:     l.gen.ctx,
		session: l.gen.ctx.Done(),
		ring:    f.ring,
		routes:  make([]entry, len(f.claims)),
		closed:  closed,
		changed: make(chan struct{}),
	}
	version := f.ring.Version()
	addrs := make([]string, len(f.ids))
	for i, id := range f.ids {
		addrs[i] = f.addr(id)
	}
	for p := range s.routes {
		e := &s.routes[p]
		if i := f.ring.OwnerIndex(p); i >= 0 {
			e.next, e.nextAddr = f.ids[i], addrs[i]
		}
		e.route = Route{Partition: p, Owner: e.next, Addr: e.nextAddr, RingVersion: version}
		if c := f.claims[p]; c.epoch != 0 {
			e.route.Owner, e.route.Addr, e.route.Epoch, e.route.Since = c.owner, f.addr(c.owner), c.epoch, c.since
		}
		if st := l.state(p); !closed && st.phase == phaseServing {
			e.serving, e.t, e.route.Local = st, st.t, true
			s.owned = append(s.owned, p)
		} else if e.route.Owner == s.self {
			e.route = e.unserved(s.self)
		}
	}
	s.members = make([]Member, 0, len(f.all))
	for _, id := range f.all { // drained members included: they stay members
		s.members = append(s.members, f.members[id].m)
	}
	return s
}
