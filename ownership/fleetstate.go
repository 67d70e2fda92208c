package ownership

import (
	"maps"
	"slices"

	"github.com/hashicorp/go-hclog"
)

// fleetState is the fleet as one consumer of a fleetReader knows it: the
// members, the drained ones, their ring, and every partition's claim with
// the revision it is known at. The ring is a pure function of the ring
// configuration and the members that are not drained; a drained node stays
// a member. The Node's event loop and the Observer fold the reader's
// listings and events into it by the same rules; each then builds its own
// immutable routing table from it. It is not safe for concurrent use: one
// goroutine owns it.
type fleetState struct {
	ringCfg RingConfig
	log     hclog.Logger

	members map[string]memberRec
	drained map[string]bool // drain marks, members or not
	all     []string        // sorted IDs of all members, drained ones included
	ids     []string        // sorted IDs of the members not drained: the ring's input
	ring    *Ring
	claims  []claim // by partition
	lastRev []int64 // by partition: the revision of claims[p]
	rev     int64   // the latest revision applied

	// claimChanged, if set, is called after claims[p] changed.
	claimChanged func(p int)
}

func newFleetState(cfg RingConfig, log hclog.Logger) *fleetState {
	f := &fleetState{
		ringCfg: cfg,
		log:     log,
		members: make(map[string]memberRec),
		drained: make(map[string]bool),
		claims:  make([]claim, cfg.Partitions),
		lastRev: make([]int64, cfg.Partitions),
	}
	f.updateRing()
	return f
}

// forget drops every claim and its revision: the claims known from now on
// come from a new session's listing.
func (f *fleetState) forget() {
	clear(f.claims)
	clear(f.lastRev)
}

// apply folds one update of a fleetReader into f.
func (f *fleetState) apply(u fleetUpdate) {
	if u.lst != nil {
		f.reset(u.lst)
		return
	}
	f.rev = max(f.rev, u.rev)
	membersChanged := false
	for _, e := range u.events {
		f.rev = max(f.rev, e.rev)
		switch {
		case e.member && e.put:
			f.members[e.id] = e.rec
			membersChanged = true
		case e.member:
			if _, ok := f.members[e.id]; ok {
				delete(f.members, e.id)
				membersChanged = true
			}
		case e.drain:
			if f.drained[e.id] != e.put {
				if e.put {
					f.drained[e.id] = true
				} else {
					delete(f.drained, e.id)
				}
				membersChanged = true
			}
		default:
			f.setClaim(e.p, e.rev, e.claim)
		}
	}
	if membersChanged {
		f.updateRing()
	}
}

// reset replaces the members and claims with lst's. Claims known at a later
// revision than lst's (from a transaction's result) are kept.
func (f *fleetState) reset(lst *listing) {
	f.rev = max(f.rev, lst.rev)
	f.members = maps.Clone(lst.members)
	f.drained = maps.Clone(lst.drained)
	if f.drained == nil {
		f.drained = make(map[string]bool)
	}
	for p, c := range lst.claims {
		f.setClaim(p, lst.rev, c)
	}
	f.updateRing()
}

// setClaim records that partition p's claim was c at revision rev, unless
// a later state of it is already known. Watch events, listings and
// transaction results all go through it, whatever order they arrive in.
func (f *fleetState) setClaim(p int, rev int64, c claim) {
	if rev <= f.lastRev[p] {
		return
	}
	f.lastRev[p] = rev
	old := f.claims[p]
	f.claims[p] = c
	if c != old && f.claimChanged != nil {
		f.claimChanged(p)
	}
}

// updateRing recomputes the ring if the set of members not drained
// changed.
func (f *fleetState) updateRing() {
	f.all = slices.Sorted(maps.Keys(f.members))
	ids := slices.DeleteFunc(slices.Clone(f.all), func(id string) bool { return f.drained[id] })
	if f.ring != nil && slices.Equal(ids, f.ids) {
		return
	}
	r, err := NewRing(ids, f.ringCfg)
	if err != nil { // cannot happen: the reader validates the IDs and the config is valid
		f.log.Error("compute ring", "error", err)
		return
	}
	f.ids, f.ring = ids, r
	f.log.Debug("ring changed", "members", len(ids), "drained", len(f.all)-len(ids), "version", r.Version())
}

// addr returns the advertised address of member id, "" if unknown.
func (f *fleetState) addr(id string) string { return f.members[id].m.Addr }
