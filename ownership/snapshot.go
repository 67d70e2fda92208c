package ownership

import "time"

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
	Local bool
	// RingVersion is the Version of the ring the route was computed from.
	RingVersion uint64
}

// snapshot is an immutable routing table, published by the event loop.
type snapshot struct {
	ring    *Ring
	routes  []entry
	members []Member
	owned   []int
	closed  bool
	changed chan struct{} // closed when the next snapshot is published
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
		if closed {
			continue
		}
		if st := l.state(p); st.phase == phaseServing {
			e.serving, e.t, e.route.Local = st, st.t, true
			s.owned = append(s.owned, p)
		}
	}
	s.members = make([]Member, 0, len(f.all))
	for _, id := range f.all { // drained members included: they stay members
		s.members = append(s.members, f.members[id].m)
	}
	return s
}
