package fleetview

import (
	"maps"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// State is the fleet as one consumer of a Reader knows it: the members,
// the drained ones, the placements, their ring, and every partition's
// claim with the revision it is known at. The ring is a pure function of
// the ring configuration, the members that are not drained with their
// weights, and the placements (ring.Ring.Place: a placement on a node that
// is gone or drained falls back to the ring); a drained node stays a
// member. The Node's event loop and the Observer fold the reader's
// listings and events into it by the same rules; each then builds its own
// immutable routing table from it by the one route rule (State.Route). It
// is not safe for concurrent use: one goroutine owns it.
type State struct {
	ringCfg ring.Config
	log     hclog.Logger

	Members map[string]MemberRec
	Drained map[string]bool // drain marks, members or not
	All     []string        // sorted IDs of all members, drained ones included
	IDs     []string        // sorted IDs of the members not drained: the ring's input
	Weights []int           // Weights[i] is the published weight of IDs[i]
	without *without        // the ring without one member (OwnerWithout)
	// Placements are the pins and moves by partition.
	Placements map[int]Placement
	// Shape is how the fleet partitions its keys: the partition count and
	// the resize in progress (see Shape).
	Shape *Shape
	// Base is the ring of the members alone; Ring is Base with the
	// placements applied, the owner of every partition by the spec's
	// count. During a resize, TargetRing is the same by the target count,
	// the owner of the partitions of done groups (Owner).
	Base       *ring.Ring
	Ring       *ring.Ring
	TargetRing *ring.Ring
	Claims     []Claim // by partition number, Shape.Max() of them at least
	lastRev    []int64 // by partition: the revision of Claims[p]
	// Rev is the revision of the latest update or listing applied: the
	// state holds every change up to it and none after it (a Reader
	// delivers consistent cuts), except for claims known from a
	// transaction's result before the watch brings them (SetClaim).
	Rev int64
	// Spec is the fleet's spec as last read (ModRev 0 before any); the
	// rings follow its algorithm (see followSpec).
	Spec Spec

	// departed are the members whose keys were deleted while claims bound
	// to their lease stood, by ID: a graceful leave deletes its member key
	// first and then hands its partitions off, serving them meanwhile.
	// Their addresses route to those claims until the last one ends.
	departed map[string]*departure

	// ClaimChanged, if set, is called after Claims[p] changed.
	ClaimChanged func(p int)
}

// departure is a departed member and the count of claims still bound to
// its lease.
type departure struct {
	rec    MemberRec
	claims int
}

// NewState returns the empty fleet of a ring configured by cfg.
func NewState(cfg ring.Config, log hclog.Logger) *State {
	f := &State{
		ringCfg: cfg,
		log:     log,
		Members: make(map[string]MemberRec),
		Drained: make(map[string]bool),
		Claims:  make([]Claim, cfg.Partitions),

		Placements: make(map[int]Placement),
		Shape:      NewShape(cfg.Partitions, 0),
		lastRev:    make([]int64, cfg.Partitions),
		departed:   make(map[string]*departure),
	}
	f.updateRing()
	return f
}

// Forget drops every claim and its revision: the claims known from now on
// come from a new session's listing.
func (f *State) Forget() {
	clear(f.Claims)
	clear(f.lastRev)
	clear(f.departed)
}

// Apply folds one update of a Reader into f.
func (f *State) Apply(u Update) {
	if u.Listing != nil {
		f.reset(u.Listing, u.CatchUp)
		return
	}
	f.Rev = max(f.Rev, u.Rev)
	membersChanged, placed := false, false
	for _, e := range u.Events {
		f.Rev = max(f.Rev, e.Rev)
		switch {
		case e.Resize != nil:
			if f.applyResize(e) {
				placed = true
			}
			f.syncSpecRev()
		case e.Member && e.Put:
			f.Members[e.ID] = e.Rec
			delete(f.departed, e.ID)
			membersChanged = true
		case e.Member:
			if rec, ok := f.Members[e.ID]; ok {
				delete(f.Members, e.ID)
				f.depart(e.ID, rec)
				membersChanged = true
			}
		case e.Drain:
			if f.Drained[e.ID] != e.Put {
				if e.Put {
					f.Drained[e.ID] = true
				} else {
					delete(f.Drained, e.ID)
				}
				membersChanged = true
			}
		case e.Spec:
			membersChanged = f.followSpec(e.SpecRec) || membersChanged
			f.syncSpecRev()
		case e.Place && e.P >= f.Shape.Max():
			// A placement beyond the fleet's partition numbers: ignored.
		case e.Place:
			if old, ok := f.Placements[e.P]; ok != e.Put || old != e.Placement {
				if e.Put {
					f.Placements[e.P] = e.Placement
				} else {
					delete(f.Placements, e.P)
				}
				placed = true
			}
		default:
			f.SetClaim(e.P, e.Rev, e.Claim)
		}
	}
	if membersChanged || placed {
		f.updateRing()
	}
}

// reset replaces the members and claims with lst's; after a catch-up
// listing, a member absent from lst whose claims stand departs. Claims known at a later
// revision than lst's (from a transaction's result) are kept.
func (f *State) reset(lst *Listing, catchUp bool) {
	f.Rev = max(f.Rev, lst.Rev)
	before := f.Members
	f.Members = maps.Clone(lst.Members)
	f.Drained = maps.Clone(lst.Drained)
	if f.Drained == nil {
		f.Drained = make(map[string]bool)
	}
	f.Placements = maps.Clone(lst.Placements)
	if f.Placements == nil {
		f.Placements = make(map[int]Placement)
	}
	if lst.Spec.ModRev != 0 {
		if lst.Spec.ModRev < f.Spec.ModRev && lst.Rev >= f.Spec.ModRev {
			// Read after the spec's write this reader knows, the listing
			// holds an earlier one: etcd's revisions went backwards (a
			// restore from a snapshot). The listing is what etcd holds.
			f.Spec.ModRev = 0
		}
		f.followSpec(lst.Spec)
	}
	if lst.Shape != nil {
		f.setShape(lst.Shape)
	}
	f.syncSpecRev()
	for p, c := range lst.Claims {
		f.SetClaim(p, lst.Rev, c)
	}
	for id, rec := range before {
		if _, ok := f.Members[id]; !ok && catchUp {
			f.depart(id, rec)
		}
	}
	for id, d := range f.departed {
		if _, ok := f.Members[id]; ok {
			delete(f.departed, id)
		} else if d.claims = f.claimsOf(d.rec); d.claims == 0 {
			delete(f.departed, id)
		}
	}
	f.updateRing()
}

// depart records that member id (rec) left while claims bound to its
// lease may stand: its address keeps routing to them (see Route).
func (f *State) depart(id string, rec MemberRec) {
	if rec.Member.Addr == "" {
		return
	}
	if n := f.claimsOf(rec); n > 0 {
		f.departed[id] = &departure{rec: rec, claims: n}
	}
}

// claimsOf returns the number of claims held by rec's member under rec's
// lease.
func (f *State) claimsOf(rec MemberRec) int {
	n := 0
	for _, c := range f.Claims {
		if c.Epoch != 0 && c.Owner == rec.Member.ID && c.Lease == rec.Lease {
			n++
		}
	}
	return n
}

// holderAddr returns the address of claim c's holder: the member's, or a
// departed member's while the claim is bound to its lease; "" if unknown.
func (f *State) holderAddr(c Claim) string {
	if m, ok := f.Members[c.Owner]; ok {
		return m.Member.Addr
	}
	if d := f.departed[c.Owner]; d != nil && d.rec.Lease == c.Lease {
		return d.rec.Member.Addr
	}
	return ""
}

// SetClaim records that partition p's claim was c at revision rev, unless
// a later state of it is already known. Watch events, listings and
// transaction results all go through it, whatever order they arrive in.
func (f *State) SetClaim(p int, rev int64, c Claim) {
	if p < 0 || p >= f.Shape.Max() {
		return
	}
	f.grow(p + 1)
	if rev <= f.lastRev[p] {
		return
	}
	f.lastRev[p] = rev
	old := f.Claims[p]
	f.Claims[p] = c
	if old != c {
		f.countDeparted(old, -1)
		f.countDeparted(c, 1)
	}
	if c != old && f.ClaimChanged != nil {
		f.ClaimChanged(p)
	}
}

// followSpec records the fleet's spec s, if it is newer than the one
// known, and reports whether the ring's algorithm changed with it: every
// reader of the fleet then computes the ring by the algorithm the spec
// records at the revision it has applied. The partition count follows
// the fleet's shape (setShape), which the resize keys change in order
// with the claims. A spec of another load factor is logged and its
// algorithm not followed: that is fixed for the reader's life.
func (f *State) followSpec(s Spec) bool {
	if s.ModRev <= f.Spec.ModRev {
		return false
	}
	f.Spec = s
	if s.LoadFactor != f.ringCfg.LoadFactor {
		f.log.Error("the fleet's spec changed its load factor; not following it", "load_factor", s.LoadFactor)
		return false
	}
	if s.RingAlgorithm == f.ringCfg.Algorithm {
		return false
	}
	f.log.Info("ring algorithm changed", "from", f.ringCfg.Algorithm, "to", s.RingAlgorithm, "revision", s.ModRev)
	f.ringCfg.Algorithm = s.RingAlgorithm
	f.Base = nil
	return true
}

// syncSpecRev raises the shape's SpecRev, the spec revision claims compare
// (see Shape), to the spec's last write that this reader has applied, when
// that write left the resize in progress as the shape knows it: a write of
// the spec that changes no resize (a feature recorded in use, a change of
// the ring algorithm) arrives on the spec's watch only. A write that
// starts, aborts or ends a resize also writes the resize's record, on the
// claims' watch in order with the groups' keys, which sets SpecRev when it
// is applied, so that a claim never compares a spec revision whose resize
// its reader has not applied.
func (f *State) syncSpecRev() {
	s := f.Shape
	if s == nil || f.Spec.ModRev <= s.SpecRev || !sameResize(s.Resize, f.Spec.Resize) {
		return
	}
	f.Shape = s.with(func(c *Shape) { c.SpecRev = f.Spec.ModRev })
}

// sameResize reports whether a and b are the same resize in the same
// direction, or both none.
func sameResize(a, b *keys.Resize) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Aborting == b.Aborting
}

// Features returns the fleet's effective protocol features: those every
// member understands, drained ones included; nil for no members.
func (f *State) Features() []string {
	sets := make([][]string, 0, len(f.All))
	for _, id := range f.All {
		sets = append(sets, f.Members[id].Member.Features)
	}
	return Intersect(sets...)
}

// updateRing recomputes the base ring if the members not drained or their
// weights changed, and the ring if the base ring or the placements
// changed.
func (f *State) updateRing() {
	f.All = slices.Sorted(maps.Keys(f.Members))
	ids := slices.DeleteFunc(slices.Clone(f.All), func(id string) bool { return f.Drained[id] })
	weights := make([]int, len(ids))
	for i, id := range ids {
		weights[i] = f.Members[id].Member.Weight
	}
	if f.Base == nil || !slices.Equal(ids, f.IDs) || !slices.Equal(weights, f.Weights) {
		ms := make([]ring.Member, len(ids))
		for i, id := range ids {
			ms[i] = ring.Member{ID: id, Weight: weights[i]}
		}
		r, err := ring.NewWeighted(ms, f.ringCfg)
		if err != nil { // cannot happen: the reader validates the IDs and weights and the config is valid
			f.log.Error("compute ring", "error", err)
			return
		}
		f.IDs, f.Weights, f.Base = ids, weights, r
		f.log.Debug("ring changed", "members", len(ids), "drained", len(f.All)-len(ids), "version", r.Version())
	}
	f.Ring = f.Base.Place(f.PlacementList())
	f.TargetRing = nil
	if rs := f.Shape.Resize; rs != nil {
		cfg := f.ringCfg
		cfg.Partitions = rs.To
		ms := make([]ring.Member, len(f.IDs))
		for i, id := range f.IDs {
			ms[i] = ring.Member{ID: id, Weight: f.Weights[i]}
		}
		r, err := ring.NewWeighted(ms, cfg)
		if err != nil { // cannot happen: the record was checked and the members are the base ring's
			f.log.Error("compute the resize's target ring", "error", err)
			return
		}
		f.TargetRing = r.Place(f.PlacementList())
	}
}

// Owner returns the owner of partition p by the ring of its partition
// count (Shape.Count): the target ring for a partition of a done group,
// else the ring.
func (f *State) Owner(p int) (string, bool) {
	if f.TargetRing != nil && f.Shape.Target(p) {
		return f.TargetRing.Owner(p)
	}
	return f.Ring.Owner(p)
}

// grow makes room for partition numbers below n.
func (f *State) grow(n int) {
	if n > len(f.Claims) {
		f.Claims = append(f.Claims, make([]Claim, n-len(f.Claims))...)
		f.lastRev = append(f.lastRev, make([]int64, n-len(f.lastRev))...)
	}
}

// setShape installs s, resizing the rings if the partition count or the
// resize changed.
func (f *State) setShape(s *Shape) {
	old := f.Shape
	f.Shape = s
	f.grow(s.Max())
	if old.Partitions != s.Partitions {
		f.ringCfg.Partitions = s.Partitions
		f.Base = nil
	}
	if f.log != nil && (old.Partitions != s.Partitions || (old.Resize == nil) != (s.Resize == nil)) {
		f.log.Debug("fleet shape changed", "partitions", s.Partitions, "resizing", s.Resize != nil)
	}
}

// PlacementList returns the placements as the ring takes them, in
// partition order.
func (f *State) PlacementList() []ring.Placement {
	out := make([]ring.Placement, 0, len(f.Placements))
	for _, p := range slices.Sorted(maps.Keys(f.Placements)) {
		out = append(out, ring.Placement{Partition: p, Node: f.Placements[p].Node})
	}
	return out
}

// Addr returns the advertised address of member id, "" if unknown.
func (f *State) Addr(id string) string { return f.Members[id].Member.Addr }

// countDeparted adds delta to the count of claims of c's holder if it is a
// departed member and c is bound to its lease, and forgets the member
// when its last claim has ended.
func (f *State) countDeparted(c Claim, delta int) {
	d := f.departed[c.Owner]
	if c.Epoch == 0 || d == nil || d.rec.Lease != c.Lease {
		return
	}
	if d.claims += delta; d.claims <= 0 {
		delete(f.departed, c.Owner)
	}
}
