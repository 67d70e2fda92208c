package ring

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
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
		assert.LessOrEqual(t, loadOf(r, m.ID), r.Capacity(m.ID), m.ID)
		assert.Equal(t, m.Weight, r.Weight(m.ID))
		total += loadOf(r, m.ID)
	}
	assert.Equal(t, 1024, total)
	for p := range 1024 {
		_, ok := r.Owner(p)
		require.True(t, ok, "partition %d has no owner", p)
	}
	// A weight-2 member gets about twice the mean share of a weight-1 one.
	mean1 := float64(1024) / 12
	for _, id := range []string{ms[3].ID, ms[7].ID} {
		assert.InDelta(t, 2*mean1, float64(loadOf(r, id)), 0.25*2*mean1, id)
	}

	// Order does not matter.
	rng := rand.New(rand.NewPCG(1, 2))
	shuffledMs := append([]Member(nil), ms...)
	rng.Shuffle(len(shuffledMs), func(i, j int) { shuffledMs[i], shuffledMs[j] = shuffledMs[j], shuffledMs[i] })
	r2, err := NewWeighted(shuffledMs, cfg)
	require.NoError(t, err)
	assert.Equal(t, assignment(r), assignment(r2))
	assert.Equal(t, r.Version(), r2.Version())

	// Weights and the algorithm are inputs.
	ms[3].Weight = 3
	r3, err := NewWeighted(ms, cfg)
	require.NoError(t, err)
	assert.NotEqual(t, r.Version(), r3.Version())
	ms[3].Weight = 2
	bounded, err := NewWeighted(ms, Config{Partitions: 1024, LoadFactor: 1.25, Algorithm: AlgorithmBounded})
	require.NoError(t, err)
	assert.NotEqual(t, r.Version(), bounded.Version())
	assert.Equal(t, 1, bounded.Weight(ms[3].ID), "AlgorithmBounded ignores weights")
	assert.Equal(t, AlgorithmBounded, bounded.Algorithm())
	assert.Equal(t, AlgorithmWeighted, r.Algorithm())
	unset, err := NewWeighted(ms, Config{Partitions: 1024, LoadFactor: 1.25})
	require.NoError(t, err)
	assert.Equal(t, r.Version(), unset.Version(), "an unset algorithm is AlgorithmWeighted")

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
		a, b := assignment(base), assignment(next)
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
	assert.Greater(t, loadOf(hr, ms[5].ID), loadOf(base, ms[5].ID))
}

// TestRingPlace: a placement gives its partition to its node over the
// ring's choice; one on a non-member or out of range is ignored; the
// result depends on the set of placements, not their order, and Version
// says which were applied.
func TestRingPlace(t *testing.T) {
	for _, alg := range []Algorithm{AlgorithmBounded, AlgorithmWeighted} {
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
		assert.True(t, isPlaced(placed, 0))
		assert.False(t, isPlaced(placed, 5), "a placement on a non-member falls back to the ring")
		o5, _ := placed.Owner(5)
		r5, _ := r.Owner(5)
		assert.Equal(t, r5, o5)
		o9, _ := placed.Owner(9)
		assert.Equal(t, "c", o9)
		assert.NotEqual(t, r.Version(), placed.Version())
		assert.Equal(t, placed.Version(), r.Place([]Placement{pl[2], pl[1], pl[0]}).Version())
		assert.Equal(t, assignment(placed), assignment(r.Place([]Placement{pl[2], pl[1], pl[0]})))
		got0, _ := r.Owner(0)
		assert.Equal(t, owner0, got0, "the ring itself is unchanged")
		sum := 0
		for _, id := range placed.Members() {
			sum += loadOf(placed, id)
			assert.Equal(t, len(placed.Owned(id)), loadOf(placed, id))
		}
		assert.Equal(t, 64, sum)
	}
}

// checkStable verifies that r, an AlgorithmWeighted ring, is the stable
// matching its doc describes, from the definition: every member owns at
// most its capacity, ceil(LoadFactor*P*weight/total weight)+1 worked out
// exactly here, and no partition ranks a member above its owner while that
// member has room or owns a partition it ranks below this one.
func checkStable(t testing.TB, r *Ring) {
	t.Helper()
	ids := r.Members()
	n, p := len(ids), r.Partitions()
	if n == 0 {
		return
	}
	ws := make([]int, n)
	total := 0
	for i, id := range ids {
		ws[i] = r.Weight(id)
		total += ws[i]
	}
	load := new(big.Rat).SetFloat64(r.LoadFactor())
	for i, id := range ids {
		share := new(big.Rat).Mul(load, big.NewRat(int64(p)*int64(ws[i]), int64(total)))
		c := r.Capacity(id)
		// c = min(P, ceil(share)+1): c-2 < share <= c-1 unless clamped.
		if c < p {
			require.True(t, share.Cmp(new(big.Rat).SetInt64(int64(c-1))) <= 0 && share.Cmp(new(big.Rat).SetInt64(int64(c-2))) > 0,
				"%s: capacity %d for share %s", id, c, share.FloatString(6))
		}
		require.LessOrEqual(t, loadOf(r, id), c, id)
	}
	sd := seeds(ids, ws)
	// worst[m] is the rank of the worst partition member m owns.
	type pr struct {
		s    uint64
		part int
	}
	worst := make([]pr, n)
	have := make([]bool, n)
	for part := range p {
		m := ownerIndex(r, part)
		s := score(sd[m], partHash(part))
		if !have[m] || s < worst[m].s || (s == worst[m].s && part > worst[m].part) {
			worst[m], have[m] = pr{s, part}, true
		}
	}
	for part := range p {
		h := partHash(part)
		o := int32(ownerIndex(r, part))
		so := score(sd[o], h)
		for m := range n {
			s := score(sd[m], h)
			if !better(s, int32(m), so, o) {
				continue
			}
			require.Equal(t, r.Capacity(ids[m]), loadOf(r, ids[m]), "partition %d ranks %s above its owner %s, which has room", part, ids[m], ids[o])
			w := worst[m]
			require.True(t, w.s > s || (w.s == s && w.part < part),
				"partition %d ranks %s above its owner %s, which owns partition %d it ranks below", part, ids[m], ids[o], w.part)
		}
	}
}

// TestRingWeightedStable: random member sets, weights, partition counts
// and load factors give the stable matching, the same whatever the order
// of the members.
func TestRingWeightedStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 4))
	for iter := range 200 {
		n := rng.IntN(40)
		ms := make([]Member, n)
		for i, id := range randomIDs(rng, n) {
			ms[i] = Member{ID: id, Weight: rng.IntN(4)}
		}
		cfg := Config{Partitions: 1 + rng.IntN(600), LoadFactor: 1 + rng.Float64(), Algorithm: AlgorithmWeighted}
		if rng.IntN(4) == 0 {
			cfg.LoadFactor = 1
		}
		r, err := NewWeighted(ms, cfg)
		require.NoError(t, err, "iteration %d", iter)
		checkStable(t, r)
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		again, err := NewWeighted(ms, cfg)
		require.NoError(t, err)
		require.Equal(t, assignment(r), assignment(again), "iteration %d", iter)
	}
}

// TestWeightedCapacity: ceil(load*P*w/W) + 1, exactly, at most P.
func TestWeightedCapacity(t *testing.T) {
	tests := []struct {
		p, w, total int
		load        float64
		want        int
	}{
		{4096, 1, 1000, 1.25, 7},               // 5.12
		{4096, 1, 1100, 1.25, 6},               // 4.65...
		{1024, 1, 50, 1.25, 27},                // 25.6
		{1024, 1, 49, 1.25, 28},                // 26.12...
		{1024, 1, 5, 1.25, 257},                // exactly 256
		{1024, 2, 10, 1.25, 257},               // exactly 256
		{4096, 1, 5, 1, 821},                   // 819.2
		{10, 1, 20, 1.25, 2},                   // 0.625
		{1, 1, 20, 1.25, 1},                    // at most P
		{10, 1, 2, 1e300, 10},                  // at most P
		{7, 3, 3, 1.0000001, 7},                // 7.0000007 > P
		{3, 1, 3, 1.0000001, 3},                // 1.0000001
		{MaxPartitions, 64, 64 * 3, 1, 349527}, // 349525.33...
		{1000, 1, 3, 1.1, 368},                 // 366.66..., where floats round 1.1*1000 to 1100.0000000000002
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, weightedCapacity(tt.p, tt.w, tt.total, tt.load), "%+v", tt)
	}
}

// TestRingWeightedChurn holds AlgorithmWeighted to the churn goal at the
// size where bounded-load hashing cascades most (1000 members, 4096
// partitions: about 4 per member, capacity 6), with a tenth of the
// members of weight 2: over fixed random joins and leaves, the partitions
// moved average at most 1.25 times the ideal, the share of weight that
// came or went.
func TestRingWeightedChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 2 x 40 rings of 1000 members")
	}
	const n, p, samples = 1000, 4096, 40
	cfg := Config{Partitions: p, LoadFactor: 1.25, Algorithm: AlgorithmWeighted}
	rng := rand.New(rand.NewPCG(1000, 4096))
	ms := make([]Member, n)
	total := 0
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("node-%04d", i), Weight: 1}
		if i%10 == 0 {
			ms[i].Weight = 2
		}
		total += ms[i].Weight
	}
	base, err := NewWeighted(ms, cfg)
	require.NoError(t, err)
	moved := func(next []Member) int {
		r, err := NewWeighted(next, cfg)
		require.NoError(t, err)
		a, b := assignment(base), assignment(r)
		c := 0
		for i := range a {
			if a[i] != b[i] {
				c++
			}
		}
		return c
	}
	var join, leave float64
	for s := range samples {
		w := 1
		if s%10 == 0 {
			w = 2
		}
		join += float64(moved(append(slices.Clone(ms), Member{ID: fmt.Sprintf("joiner-%d", s), Weight: w}))) /
			(float64(p) * float64(w) / float64(total+w))
		i := rng.IntN(n)
		leave += float64(moved(slices.Delete(slices.Clone(ms), i, i+1))) / (float64(p) * float64(ms[i].Weight) / float64(total))
	}
	join, leave = join/samples, leave/samples
	t.Logf("moved/ideal: join %.3f, leave %.3f", join, leave)
	assert.LessOrEqual(t, join, 1.25, "join")
	assert.LessOrEqual(t, leave, 1.25, "leave")
}
