package scale

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/ring"
)

// TestRingMovedShare measures how many partitions change owner when one
// member joins or leaves, relative to the ideal 1/N (N = the larger member
// count): bounded loads move a little more than plain consistent hashing,
// and must stay within 1.3x on average.
func TestRingMovedShare(t *testing.T) {
	const sets = 200
	cfg := ring.DefaultConfig()
	rng := rand.New(rand.NewPCG(3, 20))
	var joinSum, leaveSum float64
	for range sets {
		n := 3 + rng.IntN(18)
		ids := randomIDs(rng, n+1)
		before, err := ring.New(ids[:n], cfg)
		require.NoError(t, err)

		joined, err := ring.New(ids, cfg)
		require.NoError(t, err)
		diff, err := diffRings(before, joined)
		require.NoError(t, err)
		moved := len(diff[ids[n]].Gained)
		require.Equal(t, len(joined.Owned(ids[n])), moved, "the newcomer gains only its own partitions")
		movedTotal := countMoved(before, joined)
		joinSum += float64(movedTotal) / float64(cfg.Partitions) * float64(n+1)

		gone := rng.IntN(n)
		rest := slices.Delete(slices.Clone(ids[:n]), gone, gone+1)
		left, err := ring.New(rest, cfg)
		require.NoError(t, err)
		leaveSum += float64(countMoved(before, left)) / float64(cfg.Partitions) * float64(n)
	}
	join, leave := joinSum/sets, leaveSum/sets
	t.Logf("moved share / ideal 1/N over %d member sets (N 3..20, P=%d, load %v): join %.3f, leave %.3f",
		sets, cfg.Partitions, cfg.LoadFactor, join, leave)
	require.LessOrEqual(t, join, 1.3)
	require.LessOrEqual(t, leave, 1.3)
}

func countMoved(a, b *ring.Ring) int {
	moved := 0
	for p := range a.Partitions() {
		x, _ := a.Owner(p)
		y, _ := b.Owner(p)
		if x != y {
			moved++
		}
	}
	return moved
}

func TestRingdiffRings(t *testing.T) {
	cfg := ring.Config{Partitions: 256, LoadFactor: 1.25}
	abc, err := ring.New([]string{"a", "b", "c"}, cfg)
	require.NoError(t, err)
	abcd, err := ring.New([]string{"a", "b", "c", "d"}, cfg)
	require.NoError(t, err)

	t.Run("join", func(t *testing.T) {
		d, err := diffRings(abc, abcd)
		require.NoError(t, err)
		require.Equal(t, abcd.Owned("d"), d["d"].Gained)
		require.Empty(t, d["d"].Lost)
		checkdiffRings(t, abc, abcd, d)
	})
	t.Run("leave", func(t *testing.T) {
		d, err := diffRings(abcd, abc)
		require.NoError(t, err)
		require.Equal(t, abcd.Owned("d"), d["d"].Lost)
		require.Empty(t, d["d"].Gained)
		checkdiffRings(t, abcd, abc, d)
	})
	t.Run("same ring", func(t *testing.T) {
		d, err := diffRings(abc, abc)
		require.NoError(t, err)
		require.Empty(t, d)
	})
	t.Run("from nil", func(t *testing.T) {
		d, err := diffRings(nil, abc)
		require.NoError(t, err)
		require.Len(t, d, 3)
		for _, id := range []string{"a", "b", "c"} {
			require.Equal(t, abc.Owned(id), d[id].Gained)
			require.Empty(t, d[id].Lost)
		}
	})
	t.Run("to nil", func(t *testing.T) {
		d, err := diffRings(abc, nil)
		require.NoError(t, err)
		for _, id := range []string{"a", "b", "c"} {
			require.Equal(t, abc.Owned(id), d[id].Lost)
			require.Empty(t, d[id].Gained)
		}
	})
	t.Run("both nil", func(t *testing.T) {
		d, err := diffRings(nil, nil)
		require.NoError(t, err)
		require.Empty(t, d)
	})
	t.Run("from empty ring", func(t *testing.T) {
		empty, err := ring.New(nil, cfg)
		require.NoError(t, err)
		d, err := diffRings(empty, abc)
		require.NoError(t, err)
		checkdiffRings(t, empty, abc, d)
	})
	t.Run("partition count mismatch", func(t *testing.T) {
		other, err := ring.New([]string{"a"}, ring.Config{Partitions: 255, LoadFactor: 1.25})
		require.NoError(t, err)
		d, err := diffRings(abc, other)
		require.Nil(t, d)
		require.ErrorIs(t, err, errRingMismatch)
		require.Contains(t, err.Error(), "256")
		require.Contains(t, err.Error(), "255")
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		for range 50 {
			ids := randomIDs(rng, 1+rng.IntN(30))
			k := rng.IntN(len(ids) + 1)
			j := rng.IntN(len(ids) + 1)
			a, err := ring.New(ids[:k], cfg)
			require.NoError(t, err)
			b, err := ring.New(ids[j:], cfg)
			require.NoError(t, err)
			d, err := diffRings(a, b)
			require.NoError(t, err)
			checkdiffRings(t, a, b, d)
		}
	})
}

// checkDiff verifies d = diffRings(from, to) partition by partition.
func checkdiffRings(t *testing.T, from, to *ring.Ring, d map[string]ringChange) {
	t.Helper()
	gained := make(map[string][]int)
	lost := make(map[string][]int)
	for p := range to.Partitions() {
		a, _ := from.Owner(p)
		b, _ := to.Owner(p)
		if a == b {
			continue
		}
		if a != "" {
			lost[a] = append(lost[a], p)
		}
		if b != "" {
			gained[b] = append(gained[b], p)
		}
	}
	for id, c := range d {
		require.True(t, len(c.Gained)+len(c.Lost) > 0, "%q listed without changes", id)
		require.Equal(t, gained[id], c.Gained, "%q gained", id)
		require.Equal(t, lost[id], c.Lost, "%q lost", id)
	}
	for id := range gained {
		require.Contains(t, d, id)
	}
	for id := range lost {
		require.Contains(t, d, id)
	}
}

// randomIDs returns n distinct random valid node IDs (testsupport.RandomIDs).
func randomIDs(rng *rand.Rand, n int) []string { return testsupport.RandomIDs(rng, n) }
