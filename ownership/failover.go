package ownership

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
)

// Telling a failover: a partition this node takes over because its
// previous holder lost its session, which cost the partition about a TTL
// of service, from a planned move (a graceful leave, a drain, a pin, the
// balancer), which costs milliseconds, and from an operator's force
// release. A node that takes a partition over tells them apart by what
// etcd shows on its watch when the holder's claim is deleted:
//
//   - etcd deletes every key of a lease in one revision when the lease
//     expires or is revoked, so a claim deleted in the same revision as
//     its holder's member key, bound to the same lease, went with the
//     holder's lease (causeLeaseEnded);
//   - a node that lost its session while its lease lived on (an etcd
//     outage, its member key deleted by someone else) rejoins with a new
//     lease and a member key bound to it, and then deletes the claims of
//     its old lease itself, so a claim deleted after its holder's member
//     key moved to another lease went with a lost session (causeRejoined);
//   - any other deletion (the holder handing the partition off, its member
//     key deleted earlier by a graceful leave, an operator's force release)
//     is no failover.
//
// The member watch and the claim watch deliver their events separately,
// so that a member event may arrive after a claim deletion that followed
// it: a claim deletion that names no cause yet gets one when its holder's
// member deletion at the same revision, or its holder's member key put
// under another lease before the deletion, arrives later. Both arrive
// before this node can claim the partition in the usual case: the ring
// gives this node the holder's partitions only once the holder's member
// key is gone.

// failoverCause says why the previous holder of a partition lost it; 0 is
// no failover.
type failoverCause uint8

const (
	// causeLeaseEnded: the holder's lease ended (expired, as after a crash
	// or a pause past the TTL, or revoked); its keys were deleted together.
	causeLeaseEnded failoverCause = iota + 1
	// causeRejoined: the holder lost its session, rejoined under a new
	// lease and deleted the claims of the old one.
	causeRejoined
)

// failoverCauses are the values of the cause label of
// tenure_partition_failovers_total.
var failoverCauses = []failoverCause{causeLeaseEnded, causeRejoined}

// String returns "lease_ended" or "rejoined", the label value and the
// cause field of the log line.
func (c failoverCause) String() string {
	switch c {
	case causeLeaseEnded:
		return "lease_ended"
	case causeRejoined:
		return "rejoined"
	}
	return "none"
}

// failover is a partition this node took over after its holder lost its
// session, as measured when this node acquired it (claimed and fenced).
type failover struct {
	cause  failoverCause // 0: no failover
	holder string
	// takeover is the time from this node seeing the holder's claim
	// deleted (the loss as etcd records it) to this node acquiring it.
	takeover time.Duration
	// sinceRenewal is a lower bound on the time from the holder's last
	// renewal of its lease to this node acquiring it: takeover plus the
	// lease's TTL, since etcd expires a lease no sooner than its TTL after
	// its last renewal. It is 0 (unknown) unless the lease ended and its
	// holder published its TTL. A holder that crashed or stopped served
	// at most one renewal interval past its last renewal, so that its
	// partitions went unserved for at least sinceRenewal minus that.
	sinceRenewal time.Duration
}

// lostClaim is a deletion of another holder's claim (or of a claim of an
// earlier lease of this node) that this node saw.
type lostClaim struct {
	holder string
	lease  clientv3.LeaseID
	epoch  int64         // the deleted claim's epoch
	rev    int64         // the deletion's revision
	seen   time.Time     // when this node applied the deletion
	ttl    time.Duration // the holder's lease TTL, as its member key published it; 0 unknown
	cause  failoverCause // 0: none known (yet)
}

// memberEnd is the deletion of a member key: the lease the key was bound
// to, that lease's published TTL and the deletion's revision.
type memberEnd struct {
	lease clientv3.LeaseID
	ttl   time.Duration
	rev   int64
}

// failovers is what the event loop knows of lost claims, for the
// partitions this node may take over. Only the event loop uses it; it
// holds at most one record per partition and per node ID.
type failovers struct {
	lost  map[int]lostClaim    // by partition: the last deletion of its claim, until another node claims it
	ended map[string]memberEnd // by node ID: the last deletion of its member key
}

func newFailovers() *failovers {
	return &failovers{lost: map[int]lostClaim{}, ended: map[string]memberEnd{}}
}

// observe folds u, an update of the fleet that f, the event loop's state,
// has not applied yet, into what the node knows of lost claims. self is
// this node's ID and lease its current lease; now is when it applies u.
func (fo *failovers) observe(f *fleetview.State, u fleetview.Update, self string, lease clientv3.LeaseID, now time.Time) {
	if u.Listing != nil {
		if !u.CatchUp {
			// A new generation's listing, or one read after a watch
			// failed, follows a gap in what this node saw: someone may
			// have claimed a partition after the deletion recorded and
			// released it again (a rejoining node's new member key makes
			// the nodes that took its partitions over hand them back
			// before its listing is read). A deletion recorded before the
			// gap is forgotten: a takeover across it goes uncounted
			// rather than a planned move counted.
			clear(fo.lost)
			return
		}
		// A catch-up listing covers the few revisions between a listing
		// and the watch's start. It shows no deletion; a claim it shows
		// created after a deletion means someone claimed the partition
		// since.
		for p, lc := range fo.lost {
			if p < len(u.Listing.Claims) && u.Listing.Claims[p].Epoch > lc.rev {
				delete(fo.lost, p)
			}
		}
		return
	}
	v := overlay{f: f, claims: map[int]fleetview.Claim{}, members: map[string]*fleetview.MemberRec{}}
	for _, e := range u.Events {
		switch {
		case e.Member && e.Put:
			rec := e.Rec
			v.members[e.ID] = &rec
			fo.memberMoved(e.ID, rec.Lease, e.Rev)
		case e.Member:
			old, ok := v.member(e.ID)
			v.members[e.ID] = nil
			if ok {
				fo.memberEnded(e.ID, memberEnd{lease: old.Lease, ttl: old.TTL, rev: e.Rev})
			}
		case e.Drain || e.Place:
		case e.Put:
			v.claims[e.P] = e.Claim
			if e.Claim.Owner != self || e.Claim.Lease != lease {
				delete(fo.lost, e.P) // another holder: this node takes nothing over from the deletion
			}
		default:
			old := v.claim(e.P)
			v.claims[e.P] = fleetview.Claim{}
			if old.Epoch != 0 && old.Epoch < e.Rev && old.Lease != 0 {
				fo.lost[e.P] = fo.classify(old, e.Rev, now, v)
			}
		}
	}
}

// classify returns the record of the deletion at rev of claim c, seen at
// now, with the fleet as v shows it at rev.
func (fo *failovers) classify(c fleetview.Claim, rev int64, now time.Time, v overlay) lostClaim {
	lc := lostClaim{holder: c.Owner, lease: c.Lease, epoch: c.Epoch, rev: rev, seen: now}
	m, member := v.member(c.Owner)
	end, ended := fo.ended[c.Owner]
	switch {
	case ended && end.lease == c.Lease && end.rev == rev:
		lc.cause, lc.ttl = causeLeaseEnded, end.ttl
	case member && m.Lease == c.Lease:
		lc.ttl = m.TTL // its member deletion at rev may come yet
	case member:
		lc.cause = causeRejoined
	}
	return lc
}

// memberMoved records that node id's member key was put at rev, bound to
// lease, and names the cause of the deletions of its claims bound to
// another lease seen after rev.
func (fo *failovers) memberMoved(id string, lease clientv3.LeaseID, rev int64) {
	for p, lc := range fo.lost {
		if lc.cause == 0 && lc.holder == id && lc.lease != lease && lc.rev > rev {
			lc.cause = causeRejoined
			fo.lost[p] = lc
		}
	}
}

// memberEnded records the deletion of node id's member key, and names the
// cause of the deletions of its claims seen at the same revision.
func (fo *failovers) memberEnded(id string, end memberEnd) {
	fo.ended[id] = end
	for p, lc := range fo.lost {
		if lc.cause == 0 && lc.holder == id && lc.lease == end.lease && lc.rev == end.rev {
			lc.cause, lc.ttl = causeLeaseEnded, end.ttl
			fo.lost[p] = lc
		}
	}
}

// takeover returns the failover of partition p, whose tenure at epoch
// is acquired at now, and forgets p's lost claim. A partition whose
// last claim deletion names no cause, or was seen after epoch, was no
// failover (cause 0).
func (fo *failovers) takeover(p int, epoch int64, now time.Time) failover {
	lc, ok := fo.lost[p]
	if !ok {
		return failover{}
	}
	delete(fo.lost, p)
	if lc.cause == 0 || lc.rev >= epoch {
		return failover{}
	}
	fv := failover{cause: lc.cause, holder: lc.holder, takeover: now.Sub(lc.seen)}
	if lc.cause == causeLeaseEnded && lc.ttl > 0 {
		fv.sinceRenewal = fv.takeover + lc.ttl
	}
	return fv
}

// overlay is the fleet's claims and members as the events of one update
// leave them, one event after the other, over the state f held before.
type overlay struct {
	f       *fleetview.State
	claims  map[int]fleetview.Claim
	members map[string]*fleetview.MemberRec // nil: deleted
}

func (v overlay) claim(p int) fleetview.Claim {
	if c, ok := v.claims[p]; ok {
		return c
	}
	if p < len(v.f.Claims) {
		return v.f.Claims[p]
	}
	return fleetview.Claim{}
}

func (v overlay) member(id string) (fleetview.MemberRec, bool) {
	if m, ok := v.members[id]; ok {
		if m == nil {
			return fleetview.MemberRec{}, false
		}
		return *m, true
	}
	m, ok := v.f.Members[id]
	return m, ok
}
