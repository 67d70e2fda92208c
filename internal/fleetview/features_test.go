package fleetview

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/ring"
)

// TestSpecRequires: the stored spec carries the features in use, which a
// build that does not know them ignores, and new fleets of the weighted
// ring record it.
func TestSpecRequires(t *testing.T) {
	stored := `{"partitions":8,"load_factor":1.25,"ring_algorithm":2,"requires":["placements","weighted_ring"]}`
	s, err := DecodeStored([]byte(stored), 7)
	require.NoError(t, err)
	assert.Equal(t, []string{FeaturePlacements, FeatureWeightedRing}, s.Requires)
	assert.Equal(t, int64(7), s.ModRev)
	enc, err := EncodeStored(s)
	require.NoError(t, err)
	assert.JSONEq(t, stored, string(enc))
	plain, err := DecodeSpec([]byte(stored))
	require.NoError(t, err)
	assert.Equal(t, s.Spec, plain)
	assert.Equal(t, []string{FeatureWeightedRing}, requiresOf(ring.AlgorithmWeighted))
	assert.Empty(t, requiresOf(ring.AlgorithmBounded))
}

// TestFeatureSets: the effective features are those every member
// publishes; a member that publishes none (an older build) leaves the
// base protocol only.
func TestFeatureSets(t *testing.T) {
	assert.Equal(t, []string{"a"}, Intersect([]string{"b", "a"}, []string{"a", "c"}))
	assert.Empty(t, Intersect([]string{"a"}, nil))
	assert.Nil(t, Intersect())
	assert.Equal(t, []string{"b"}, Lacking([]string{"a"}, []string{"b", "a"}))
	assert.Equal(t, []string{"a", "b"}, withFeature([]string{"b"}, "a"))
	assert.True(t, sortedUnique(Features()))
	assert.NotEmpty(t, Build())

	f := NewState(ring.Config{Partitions: 8, LoadFactor: 1.25}, hclog.NewNullLogger())
	member := func(rev int64, id string, fs ...string) Event {
		return Event{Rev: rev, Member: true, Put: true, ID: id, Rec: MemberRec{Member: Member{ID: id, Features: fs}}}
	}
	f.Apply(Update{Rev: 2, Events: []Event{member(1, "a", Features()...), member(2, "b", FeatureWeightedRing, FeaturePlacements)}})
	assert.Equal(t, []string{FeaturePlacements, FeatureWeightedRing}, f.Features())
	f.Apply(Update{Rev: 3, Events: []Event{member(3, "c")}})
	assert.Empty(t, f.Features())
}

// TestStateFollowsSpec: a spec event that changes the algorithm changes
// the ring every reader computes from its revision on; an older spec, or
// one of another partition count, is not followed.
func TestStateFollowsSpec(t *testing.T) {
	cfg := ring.Config{Partitions: 64, LoadFactor: 1.25, Algorithm: ring.AlgorithmBounded}
	f := NewState(cfg, hclog.NewNullLogger())
	ids := []string{"a", "b", "c"}
	var evs []Event
	for i, id := range ids {
		evs = append(evs, Event{Rev: int64(i + 1), Member: true, Put: true, ID: id, Rec: MemberRec{Member: Member{ID: id, Weight: 1}}})
	}
	f.Apply(Update{Rev: 3, Events: evs})
	ringOf := func(a ring.Algorithm) uint64 {
		c := cfg
		c.Algorithm = a
		r, err := ring.NewWeighted([]ring.Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}, c)
		require.NoError(t, err)
		return r.Version()
	}
	assert.Equal(t, ringOf(ring.AlgorithmBounded), f.Ring.Version())
	spec := func(rev int64, a ring.Algorithm, p int) Event {
		return Event{Rev: rev, Spec: true, Put: true, SpecRec: Spec{Spec: ring.Spec{Partitions: p, LoadFactor: 1.25, RingAlgorithm: a}, ModRev: rev}}
	}
	f.Apply(Update{Rev: 4, Events: []Event{spec(4, ring.AlgorithmWeighted, 64)}})
	assert.Equal(t, ringOf(ring.AlgorithmWeighted), f.Ring.Version())
	assert.Equal(t, ring.AlgorithmWeighted, f.Ring.Algorithm())
	f.Apply(Update{Rev: 5, Events: []Event{spec(3, ring.AlgorithmBounded, 64)}})
	assert.Equal(t, ring.AlgorithmWeighted, f.Ring.Algorithm(), "an older spec")
	// A spec of another partition count (a resize's end): its algorithm is
	// followed; the count follows the shape, which the resize's keys change.
	f.Apply(Update{Rev: 6, Events: []Event{spec(6, ring.AlgorithmBounded, 128)}})
	assert.Equal(t, ring.AlgorithmBounded, f.Ring.Algorithm(), "the algorithm of a spec of another partition count")
	assert.Equal(t, 64, f.Ring.Partitions(), "the partition count follows the shape")
	f.Apply(Update{Rev: 7, Events: []Event{spec(7, ring.AlgorithmWeighted, 64)}})
	assert.Equal(t, ring.AlgorithmWeighted, f.Ring.Algorithm())
	f.Apply(Update{Listing: &Listing{Rev: 8, Members: f.Members, Claims: make([]Claim, 64), Spec: spec(8, ring.AlgorithmBounded, 64).SpecRec}})
	assert.Equal(t, ring.AlgorithmBounded, f.Ring.Algorithm(), "a listing's spec")
}

func sortedUnique(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}
