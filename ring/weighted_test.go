package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func weightedIDs(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("node-%03d", i), Weight: 1}
	}
	return ms
}

// TestRingWeighted: under AlgorithmWeighted every partition has one owner,
// no member owns more than its capacity, shares follow the weights, the
// ring is a pure function of the set of (ID, weight) pairs, and the
// algorithm and the weights are part of Version.
func TestRingWeighted(t *testing.T) {
	cfg := Config{Partitions: 1024, LoadFactor: 1.25, Algorithm: AlgorithmWeighted}
	ms := weightedIDs(10)
	ms[3].Weight, ms[7].Weight = 2, 2
	r, err := NewWeighted(ms, cfg)
	require.NoError(t, err)
	total := 0
	for _, m := range ms {
		assert.LessOrEqual(t, r.Load(m.ID), r.Capacity(m.ID), m.ID)
		assert.Equal(t, m.Weight, r.Weight(m.ID))
		total += r.Load(m.ID)
	}
	assert.Equal(t, 1024, total)
	for p := range 1024 {
		_, ok := r.Owner(p)
		require.True(t, ok, "partition %d has no owner", p)
	}
	// A weight-2 member gets about twice the mean share of a weight-1 one.
	mean1 := float64(1024) / 12
	for _, id := range []string{ms[3].ID, ms[7].ID} {
		assert.InDelta(t, 2*mean1, float64(r.Load(id)), 0.25*2*mean1, id)
	}

	// Order does not matter.
	rng := rand.New(rand.NewPCG(1, 2))
	shuffledMs := append([]Member(nil), ms...)
	rng.Shuffle(len(shuffledMs), func(i, j int) { shuffledMs[i], shuffledMs[j] = shuffledMs[j], shuffledMs[i] })
	r2, err := NewWeighted(shuffledMs, cfg)
	require.NoError(t, err)
	assert.Equal(t, r.Assignment(), r2.Assignment())
	assert.Equal(t, r.Version(), r2.Version())

	// Weights and the algorithm are inputs.
	ms[3].Weight = 3
	r3, err := NewWeighted(ms, cfg)
	require.NoError(t, err)
	assert.NotEqual(t, r.Version(), r3.Version())
	ms[3].Weight = 2
	bounded, err := NewWeighted(ms, Config{Partitions: 1024, LoadFactor: 1.25})
	require.NoError(t, err)
	assert.NotEqual(t, r.Version(), bounded.Version())
	assert.Equal(t, 1, bounded.Weight(ms[3].ID), "AlgorithmBounded ignores weights")
	assert.Equal(t, AlgorithmBounded, bounded.Algorithm())
	assert.Equal(t, AlgorithmWeighted, r.Algorithm())

	_, err = NewWeighted([]Member{{ID: "a", Weight: MaxWeight + 1}}, cfg)
	assert.ErrorIs(t, err, ErrInvalidWeight)
	_, err = NewWeighted([]Member{{ID: "a", Weight: -1}}, cfg)
	assert.ErrorIs(t, err, ErrInvalidWeight)
	_, err = New([]string{"a"}, Config{Partitions: 4, LoadFactor: 1.25, Algorithm: 3})
	assert.ErrorIs(t, err, ErrInvalidAlgorithm)
}

// TestRingWeightedMinimalMoves: where the bound does not bind (a load
// factor large enough), a join moves only the partitions the joiner gains,
// a leave only the leaver's, and a weight change only partitions to or from
// that member: every member's scores depend on its own ID and weight alone.
func TestRingWeightedMinimalMoves(t *testing.T) {
	cfg := Config{Partitions: 512, LoadFactor: 64, Algorithm: AlgorithmWeighted}
	ms := weightedIDs(8)
	base, err := NewWeighted(ms, cfg)
	require.NoError(t, err)
	check := func(name string, next *Ring, only string) {
		t.Helper()
		a, b := base.Assignment(), next.Assignment()
		moved := 0
		for p := range a {
			if a[p] != b[p] {
				moved++
				assert.True(t, a[p] == only || b[p] == only, "%s: partition %d moved %s -> %s", name, p, a[p], b[p])
			}
		}
		assert.Positive(t, moved, name)
	}
	joined, err := NewWeighted(append(append([]Member(nil), ms...), Member{ID: "joiner"}), cfg)
	require.NoError(t, err)
	check("join", joined, "joiner")
	left, err := NewWeighted(ms[1:], cfg)
	require.NoError(t, err)
	check("leave", left, ms[0].ID)
	heavier := append([]Member(nil), ms...)
	heavier[5].Weight = 3
	hr, err := NewWeighted(heavier, cfg)
	require.NoError(t, err)
	check("weight", hr, ms[5].ID)
	assert.Greater(t, hr.Load(ms[5].ID), base.Load(ms[5].ID))
}

// TestRingPlace: a placement gives its partition to its node over the
// ring's choice; one on a non-member or out of range is ignored; the
// result depends on the set of placements, not their order, and Version
// says which were applied.
func TestRingPlace(t *testing.T) {
	for _, alg := range []int{AlgorithmBounded, AlgorithmWeighted} {
		cfg := Config{Partitions: 64, LoadFactor: 1.25, Algorithm: alg}
		r, err := New([]string{"a", "b", "c"}, cfg)
		require.NoError(t, err)
		assert.Same(t, r, r.Place(nil))
		assert.Same(t, r, r.Place([]Placement{{Partition: 1, Node: "gone"}, {Partition: 64, Node: "a"}, {Partition: -1, Node: "a"}}))
		owner0, _ := r.Owner(0)
		other := "a"
		if owner0 == "a" {
			other = "b"
		}
		pl := []Placement{{Partition: 0, Node: other}, {Partition: 5, Node: "gone"}, {Partition: 9, Node: "c"}}
		placed := r.Place(pl)
		got, _ := placed.Owner(0)
		assert.Equal(t, other, got)
		ringOwner, _ := placed.RingOwner(0)
		assert.Equal(t, owner0, ringOwner)
		assert.True(t, placed.Placed(0))
		assert.False(t, placed.Placed(5), "a placement on a non-member falls back to the ring")
		o5, _ := placed.Owner(5)
		r5, _ := r.Owner(5)
		assert.Equal(t, r5, o5)
		o9, _ := placed.Owner(9)
		assert.Equal(t, "c", o9)
		assert.NotEqual(t, r.Version(), placed.Version())
		assert.Equal(t, placed.Version(), r.Place([]Placement{pl[2], pl[1], pl[0]}).Version())
		assert.Equal(t, placed.Assignment(), r.Place([]Placement{pl[2], pl[1], pl[0]}).Assignment())
		got0, _ := r.Owner(0)
		assert.Equal(t, owner0, got0, "the ring itself is unchanged")
		sum := 0
		for _, id := range placed.Members() {
			sum += placed.Load(id)
			assert.Equal(t, len(placed.Owned(id)), placed.Load(id))
		}
		assert.Equal(t, 64, sum)
	}
}

// TestSpecAlgorithm: a spec records the algorithm; a zero Algorithm is
// AlgorithmBounded both ways; unknown algorithms are refused.
func TestSpecAlgorithm(t *testing.T) {
	w := Config{Partitions: 8, LoadFactor: 1.25, Algorithm: AlgorithmWeighted}
	assert.Equal(t, AlgorithmWeighted, w.Spec().RingAlgorithm)
	assert.Equal(t, w, w.Spec().Config())
	b := Config{Partitions: 8, LoadFactor: 1.25}
	assert.Equal(t, AlgorithmBounded, b.Spec().RingAlgorithm)
	assert.Equal(t, b, b.Spec().Config())
	assert.ErrorIs(t, b.Spec().Compare(w.Spec()), ErrSpecMismatch)
	s, err := DecodeSpec([]byte(`{"partitions":8,"load_factor":1.25,"ring_algorithm":2}`))
	require.NoError(t, err)
	assert.Equal(t, w.Spec(), s)
	_, err = DecodeSpec([]byte(`{"partitions":8,"load_factor":1.25,"ring_algorithm":3}`))
	assert.ErrorIs(t, err, ErrInvalidSpec)
}
