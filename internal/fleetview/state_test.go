package fleetview

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ring"
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
	assert.Equal(t, -1, f.Ring.MemberIndex("a"))
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
