package fleetview

import "time"

// Route says where the work for one partition goes, as a Node or an
// Observer currently sees it. Its fields are fleet.Route's, which the
// fleet and ownership packages convert it to; fleet.Route documents them
// for users.
type Route struct {
	// Partition is the key's partition.
	Partition int
	// Owner is the node that holds the partition's claim or, if nobody holds
	// one, the node the ring assigns it to, which is about to claim it.
	// Empty if unknown (no members).
	Owner string
	// Addr is Owner's advertised address, empty if unknown (Owner published
	// none, or its member key is gone while its claim stands and no member
	// key bound to the claim's lease was seen).
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

// Route returns partition p's route in f, for p in [0, P), by the one rule
// every Node and every Observer routes with, so that for one state of the
// fleet they name the same owner:
//
//   - while a claim on p stands, its holder, at the claim's epoch, with the
//     holder's address if it published one (and kept while the holder
//     leaves: its member key deleted, its claims still bound to the lease
//     of that key) and an empty Addr otherwise;
//   - while none stands, the ring's owner of p, which is about to claim it,
//     with epoch 0;
//   - with no members, no owner;
//   - for a partition that is not active (Shape.Active: a source of a
//     done group, a target of one not done) whose claim has ended, no
//     owner: no key maps to it.
//
// A claim's holder is named even when it has no address because it alone
// can admit p's work until its claim ends: any other node would refuse it,
// the ring's next owner included, since it cannot claim p before the
// holder's claim is gone. A caller that finds no address (a router answers
// ownership.ErrNoOwner) waits for the next view of the fleet instead of
// sending work where it cannot run. Local is false: a Node sets it for what it serves.
func (f *State) Route(p int) Route {
	r := Route{Partition: p, RingVersion: f.Ring.Version()}
	if p >= len(f.Claims) {
		return r
	}
	if c := f.Claims[p]; c.Epoch != 0 {
		r.Owner, r.Addr, r.Epoch, r.Since = c.Owner, f.holderAddr(c), c.Epoch, c.Since
	} else if !f.Shape.Active(p) {
		return r
	} else if id, ok := f.Owner(p); ok {
		r.Owner, r.Addr = id, f.Addr(id)
	}
	return r
}
