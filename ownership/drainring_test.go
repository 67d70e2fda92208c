package ownership

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFleetStateDrain: the ring is a pure function of the members minus the
// drained ones, whichever order marks and members arrive in; a drain mark
// of a non-member changes nothing until it joins.
func TestFleetStateDrain(t *testing.T) {
	cfg := RingConfig{Partitions: 32, LoadFactor: DefaultRingConfig().LoadFactor}
	member := func(rev int64, id string, put bool) fleetEvent {
		return fleetEvent{rev: rev, member: true, put: put, id: id, rec: memberRec{m: Member{ID: id}}}
	}
	drain := func(rev int64, id string, put bool) fleetEvent {
		return fleetEvent{rev: rev, drain: true, put: put, id: id}
	}
	want := func(ids ...string) uint64 {
		r, err := NewRing(ids, cfg)
		require.NoError(t, err)
		return r.Version()
	}

	f := newFleetState(cfg, hclog.NewNullLogger())
	f.apply(fleetUpdate{rev: 3, events: []fleetEvent{member(1, "a", true), member(2, "b", true), drain(3, "c", true)}})
	assert.Equal(t, want("a", "b"), f.ring.Version(), "a mark of a non-member")
	f.apply(fleetUpdate{rev: 4, events: []fleetEvent{member(4, "c", true)}})
	assert.Equal(t, want("a", "b"), f.ring.Version(), "a drained node joins")
	assert.Equal(t, []string{"a", "b", "c"}, f.all)
	f.apply(fleetUpdate{rev: 5, events: []fleetEvent{drain(5, "a", true)}})
	assert.Equal(t, want("b"), f.ring.Version())
	assert.Equal(t, -1, f.ring.MemberIndex("a"))
	f.apply(fleetUpdate{rev: 6, events: []fleetEvent{drain(6, "a", false), drain(6, "c", false)}})
	assert.Equal(t, want("a", "b", "c"), f.ring.Version())

	// A listing replaces the marks.
	f.apply(fleetUpdate{lst: &listing{rev: 7, members: f.members, drained: map[string]bool{"b": true}, claims: make([]claim, 32)}})
	assert.Equal(t, want("a", "c"), f.ring.Version())

	// Another consumer that learns the same facts in another order agrees.
	g := newFleetState(cfg, hclog.NewNullLogger())
	g.apply(fleetUpdate{rev: 7, events: []fleetEvent{drain(1, "b", true), member(2, "c", true), member(3, "b", true), member(4, "a", true)}})
	assert.Equal(t, f.ring.Version(), g.ring.Version())
}
