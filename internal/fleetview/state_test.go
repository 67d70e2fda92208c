package fleetview

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership/ring"
)

// TestFleetStateDrain: the ring is a pure function of the members minus the
// drained ones, whichever order marks and members arrive in; a drain mark
// of a non-member changes nothing until it joins.
func TestFleetStateDrain(t *testing.T) {
	cfg := ring.Config{Partitions: 32, LoadFactor: ring.DefaultConfig().LoadFactor}
	member := func(rev int64, id string, put bool) Event {
		return Event{Rev: rev, Member: true, Put: put, ID: id, Rec: MemberRec{Member: Member{ID: id}}}
	}
	drain := func(rev int64, id string, put bool) Event {
		return Event{Rev: rev, Drain: true, Put: put, ID: id}
	}
	want := func(ids ...string) uint64 {
		r, err := ring.New(ids, cfg)
		require.NoError(t, err)
		return r.Version()
	}

	f := NewState(cfg, hclog.NewNullLogger())
	f.Apply(Update{Rev: 3, Events: []Event{member(1, "a", true), member(2, "b", true), drain(3, "c", true)}})
	assert.Equal(t, want("a", "b"), f.Ring.Version(), "a mark of a non-member")
	f.Apply(Update{Rev: 4, Events: []Event{member(4, "c", true)}})
	assert.Equal(t, want("a", "b"), f.Ring.Version(), "a drained node joins")
	assert.Equal(t, []string{"a", "b", "c"}, f.All)
	f.Apply(Update{Rev: 5, Events: []Event{drain(5, "a", true)}})
	assert.Equal(t, want("b"), f.Ring.Version())
	assert.NotContains(t, f.Ring.Members(), "a")
	f.Apply(Update{Rev: 6, Events: []Event{drain(6, "a", false), drain(6, "c", false)}})
	assert.Equal(t, want("a", "b", "c"), f.Ring.Version())

	// A listing replaces the marks.
	f.Apply(Update{Listing: &Listing{Rev: 7, Members: f.Members, Drained: map[string]bool{"b": true}, Claims: make([]Claim, 32)}})
	assert.Equal(t, want("a", "c"), f.Ring.Version())

	// Another consumer that learns the same facts in another order agrees.
	g := NewState(cfg, hclog.NewNullLogger())
	g.Apply(Update{Rev: 7, Events: []Event{drain(1, "b", true), member(2, "c", true), member(3, "b", true), member(4, "a", true)}})
	assert.Equal(t, f.Ring.Version(), g.Ring.Version())
}

// TestFleetStateDeparted: a member whose key is deleted while claims bound
// to its lease stand (a graceful leave) keeps its address in their routes
// until the last of them ends; a claim under another lease, a rejoin or
// the end of its claims forgets it.
func TestFleetStateDeparted(t *testing.T) {
	cfg := ring.Config{Partitions: 8, LoadFactor: ring.DefaultConfig().LoadFactor}
	rec := MemberRec{Member: Member{ID: "a", Addr: "a:1"}, Lease: 7}
	claim := func(rev int64, p int, owner string, lease int64) Event {
		c := Claim{}
		if owner != "" {
			c = Claim{Owner: owner, Epoch: rev, Lease: clientv3.LeaseID(lease)}
		}
		return Event{Rev: rev, P: p, Put: owner != "", Claim: c}
	}
	f := NewState(cfg, hclog.NewNullLogger())
	f.Apply(Update{Rev: 4, Events: []Event{
		{Rev: 1, Member: true, Put: true, ID: "a", Rec: rec},
		claim(2, 0, "a", 7), claim(3, 1, "a", 7), claim(4, 2, "b", 9),
	}})
	f.Apply(Update{Rev: 5, Events: []Event{{Rev: 5, Member: true, ID: "a"}}})
	assert.Equal(t, "a:1", f.Route(0).Addr, "a leaves: its claims still route to it")
	assert.Equal(t, "a:1", f.Route(1).Addr)
	assert.Empty(t, f.Route(2).Addr, "b published no member key")

	f.Apply(Update{Rev: 6, Events: []Event{claim(6, 0, "", 0)}})
	assert.Equal(t, "a:1", f.Route(1).Addr, "one claim of a's still stands")
	f.Apply(Update{Rev: 7, Events: []Event{claim(7, 0, "a", 8)}})
	assert.Empty(t, f.Route(0).Addr, "a claim of a under another lease")
	f.Apply(Update{Rev: 8, Events: []Event{claim(8, 1, "", 0)}})
	assert.Empty(t, f.departed, "a's last claim under its lease ended")

	// A rejoin replaces the departure.
	f.Apply(Update{Rev: 10, Events: []Event{{Rev: 9, Member: true, Put: true, ID: "a", Rec: rec}, claim(10, 3, "a", 7)}})
	f.Apply(Update{Rev: 11, Events: []Event{{Rev: 11, Member: true, ID: "a"}}})
	require.Contains(t, f.departed, "a")
	f.Apply(Update{Rev: 12, Events: []Event{{Rev: 12, Member: true, Put: true, ID: "a", Rec: MemberRec{Member: Member{ID: "a", Addr: "a:2"}, Lease: 11}}}})
	assert.Empty(t, f.departed)
	assert.Equal(t, "a:2", f.Route(3).Addr, "a member's claims route to its published address")
}

// A listing (a catch-up at watch start, a resync) without a member that
// left while claims bound to its lease stand keeps routing them to its
// address, as the member's delete event does.
func TestFleetStateDepartedInListing(t *testing.T) {
	cfg := ring.Config{Partitions: 4, LoadFactor: ring.DefaultConfig().LoadFactor}
	rec := MemberRec{Member: Member{ID: "a", Addr: "a:1"}, Lease: 7}
	held := Claim{Owner: "a", Epoch: 2, Lease: 7}
	f := NewState(cfg, hclog.NewNullLogger())
	f.Apply(Update{Listing: &Listing{Rev: 2, Members: map[string]MemberRec{"a": rec}, Claims: []Claim{held, {}, {}, {}}}})
	f.Apply(Update{Listing: &Listing{Rev: 5, Members: map[string]MemberRec{}, Claims: []Claim{held, {}, {}, {}}}, CatchUp: true})
	assert.Equal(t, "a:1", f.Route(0).Addr, "a left: its claim still routes to it")
	f.Apply(Update{Listing: &Listing{Rev: 6, Members: map[string]MemberRec{}, Claims: make([]Claim, 4)}, CatchUp: true})
	assert.Empty(t, f.departed, "a's last claim ended")
}

// TestFleetStateListingAfterRewind: a listing read after the spec's write
// that the state knows, holding an earlier write of the spec, is what etcd
// holds after a restore from a snapshot: the state follows it, and claims
// compare the listed spec's revision (a claim comparing the later one
// would be refused for ever). A listing read before the known write does
// not take it back.
func TestFleetStateListingAfterRewind(t *testing.T) {
	cfg := ring.Config{Partitions: 8, LoadFactor: ring.DefaultConfig().LoadFactor}
	spec := func(rev int64, requires ...string) Spec {
		return Spec{Spec: ring.Spec{Partitions: 8, LoadFactor: cfg.LoadFactor}, Requires: requires, ModRev: rev}
	}
	listing := func(rev int64, s Spec) *Listing {
		return &Listing{Rev: rev, Spec: s, Shape: NewShape(8, s.ModRev), Claims: make([]Claim, 8)}
	}
	f := NewState(cfg, hclog.NewNullLogger())
	f.Apply(Update{Listing: listing(10, spec(5))})
	f.Apply(Update{Rev: 266, Events: []Event{{Rev: 266, Spec: true, SpecRec: spec(266, FeatureHandover)}}})
	require.Equal(t, int64(266), f.Spec.ModRev)
	require.Equal(t, int64(266), f.Shape.SpecRev, "a spec write that changes no resize raises the revision claims compare")

	f.Apply(Update{Listing: listing(200, spec(5))})
	assert.Equal(t, int64(266), f.Spec.ModRev, "a listing read before the known write")
	assert.Equal(t, int64(266), f.Shape.SpecRev)

	f.Apply(Update{Listing: listing(1_000_000_300, spec(5))})
	assert.Equal(t, int64(5), f.Spec.ModRev, "the restored spec")
	assert.Empty(t, f.Spec.Requires)
	assert.Equal(t, int64(5), f.Shape.SpecRev, "claims compare the restored spec's revision")
}
