package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/ring"
)

// simRing builds the ring of n members (weights by index, default 1) with
// the placements of moves applied.
func simRing(t testing.TB, n, p int, weights map[int]int, moves map[int]string) *ring.Ring {
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.Member{ID: fmt.Sprintf("n%02d", i), Weight: weights[i]}
	}
	r, err := ring.NewWeighted(ms, ring.Config{Partitions: p, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted})
	require.NoError(t, err)
	var pl []ring.Placement
	for q, node := range moves {
		pl = append(pl, ring.Placement{Partition: q, Node: node})
	}
	return r.Place(pl)
}

// converge runs passes over a fleet, applying each pass's moves as the
// fleet would, until a pass moves nothing with no partition cooling, and
// returns the number of passes that moved something, the moves, and the
// imbalance at the end.
func converge(t testing.TB, n, p int, weights map[int]int, loads []float64, cfg Config, maxPasses int) (passes, moved int, imbalance float64, in Input) {
	moves := map[int]string{}
	now := time.Unix(0, 0)
	movedAt := map[int]time.Time{}
	for range maxPasses {
		in = Input{Ring: simRing(t, n, p, weights, moves), Loads: loads, Moves: moves, Moved: movedAt, Now: now}
		pass := Plan(in, cfg)
		require.LessOrEqual(t, len(pass.Moves), Budget(p, cfg.Budget))
		imbalance = pass.Before
		if len(pass.Moves) == 0 {
			if !cooling(movedAt, now, cfg.Cooldown) {
				break
			}
			now = now.Add(cfg.Interval)
			continue
		}
		passes++
		moved += len(pass.Moves)
		for _, m := range pass.Moves {
			moves[m.Partition] = m.To
			movedAt[m.Partition] = now
		}
		for _, q := range pass.Removes {
			delete(moves, q)
		}
		now = now.Add(cfg.Interval)
	}
	return passes, moved, imbalance, in
}

// cooling reports whether a partition was moved within the cooldown
// before now: a member that received it receives nothing more until then,
// so an idle pass meanwhile is not the end of a convergence.
func cooling(movedAt map[int]time.Time, now time.Time, cooldown time.Duration) bool {
	for _, t := range movedAt {
		if now.Sub(t) < cooldown {
			return true
		}
	}
	return false
}

// TestPlanSteadyLoadNoMoves: once converged, steady load with noise of
// +-5% per partition causes no moves (hysteresis), and a fleet without
// load none either.
func TestPlanSteadyLoadNoMoves(t *testing.T) {
	const n, p = 10, 1024
	loads := make([]float64, p)
	for i := range loads {
		loads[i] = 1
	}
	cfg := DefaultConfig()
	_, _, _, in := converge(t, n, p, nil, loads, cfg, 50)
	rng := rand.New(rand.NewPCG(1, 1))
	for round := range 100 {
		noisy := make([]float64, p)
		for i := range noisy {
			noisy[i] = loads[i] * (0.95 + 0.1*rng.Float64())
		}
		in.Loads, in.Now = noisy, in.Now.Add(cfg.Interval)
		pass := Plan(in, cfg)
		require.Empty(t, pass.Moves, "round %d: imbalance %.3f", round, pass.Before)
	}
	pass := Plan(Input{Ring: simRing(t, n, p, nil, nil), Loads: make([]float64, p)}, cfg)
	assert.Empty(t, pass.Moves)
	assert.Zero(t, pass.Before)
}

// TestPlanConverges: Zipf-skewed partition loads on equal and unequal
// weights converge within the band, or within 5% of the lower bound the
// heaviest partition sets, in at most 20 passes, each within the budget.
// This load (200,000 draws of Zipf s = 1.1) is steeper than the issue's
// (s = 0.9, measured by sim/placement within 10 passes on true loads):
// 10 equal nodes take 12 passes (119 moves at the budget of 10), 10 nodes
// some of weight 2 take 7, 50 equal nodes 15 (their bound, 6.2, leaves
// every other node to even out below the band's middle).
func TestPlanConverges(t *testing.T) {
	const p = 1024
	for _, tc := range []struct {
		name    string
		n       int
		weights map[int]int
	}{
		{"10 equal", 10, nil},
		{"10 some weight 2", 10, map[int]int{0: 2, 3: 2, 7: 2}},
		{"50 equal", 50, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 9))
			zipf := rand.NewZipf(rng, 1.1, 1, 1_000_000)
			loads := make([]float64, p)
			for range 200_000 {
				loads[int(zipf.Uint64()*2654435761)%p]++
			}
			cfg := DefaultConfig()
			_, _, before, _ := converge(t, tc.n, p, tc.weights, loads, cfg, 1)
			passes, moved, after, in := converge(t, tc.n, p, tc.weights, loads, cfg, 50)
			total, heaviest, weight, maxWeight := 0.0, 0.0, 0, 1
			for _, l := range loads {
				total += l
				heaviest = max(heaviest, l)
			}
			for i := range tc.n {
				weight += max(1, tc.weights[i])
				maxWeight = max(maxWeight, tc.weights[i])
			}
			// No placement does better than the heaviest partition on the
			// heaviest member.
			bound := heaviest / float64(maxWeight) / (total / float64(weight))
			final := Plan(in, cfg).Before
			t.Logf("imbalance %.3f -> %.3f (lower bound %.3f) in %d passes, %d moves", before, final, bound, passes, moved)
			assert.Equal(t, final, after)
			assert.LessOrEqual(t, passes, 20)
			assert.True(t, final <= cfg.Upper || final <= 1.05*bound, "imbalance %.3f, bound %.3f", final, bound)
			if tc.weights != nil {
				perWeight := func(id string) float64 {
					s := 0.0
					for q := range p {
						if o, _ := in.Ring.Owner(q); o == id {
							s += loads[q]
						}
					}
					return s / float64(in.Ring.Weight(id))
				}
				// A weight-2 node carries about twice the load of the mean
				// weight-1 node: its load per weight is within the band.
				mean := total / float64(weight)
				assert.InDelta(t, 1, perWeight("n00")/mean, cfg.Upper-1+0.01)
			}
		})
	}
}

// TestPlanRespectsPinsAndCooldown: pinned partitions and those moved
// within the cooldown stay where they are.
func TestPlanRespectsPinsAndCooldown(t *testing.T) {
	const n, p = 4, 64
	r := simRing(t, n, p, nil, nil)
	loads := make([]float64, p)
	hot := r.Owned("n00")
	for _, q := range hot {
		loads[q] = 10
	}
	for q := range loads {
		if loads[q] == 0 {
			loads[q] = 1
		}
	}
	now := time.Unix(1000, 0)
	pinned, moved := map[int]bool{}, map[int]time.Time{}
	for i, q := range hot {
		if i%2 == 0 {
			pinned[q] = true
		} else {
			moved[q] = now.Add(-30 * time.Second)
		}
	}
	cfg := DefaultConfig()
	pass := Plan(Input{Ring: r, Loads: loads, Pinned: pinned, Moved: moved, Now: now}, cfg)
	assert.Empty(t, pass.Moves, "every hot partition is pinned or cooling")
	pass = Plan(Input{Ring: r, Loads: loads, Pinned: pinned, Moved: moved, Now: now.Add(time.Minute)}, cfg)
	require.NotEmpty(t, pass.Moves, "the cooldown is over")
	for _, m := range pass.Moves {
		assert.False(t, pinned[m.Partition])
		assert.Equal(t, "n00", m.From)
	}
}

// TestPlanRemovesMovesNoLongerNeeded: a move whose node left, or which the
// ring agrees with, is removed.
func TestPlanRemovesMovesNoLongerNeeded(t *testing.T) {
	r := simRing(t, 3, 16, nil, nil)
	agree, _ := r.Owner(2)
	pass := Plan(Input{Ring: r, Loads: make([]float64, 16), Moves: map[int]string{1: "gone", 2: agree, 3: other(r, 3)}}, DefaultConfig())
	assert.Equal(t, []int{1, 2}, pass.Removes)
	assert.Empty(t, pass.Moves)
	assert.False(t, math.IsNaN(pass.Before))
}

// TestPlanIgnoresBadLoads: a load that is not a finite positive number
// counts as none, so one bad report cannot poison the mean.
func TestPlanIgnoresBadLoads(t *testing.T) {
	const n, p = 4, 64
	r := simRing(t, n, p, nil, nil)
	loads := make([]float64, p)
	for q := range loads {
		loads[q] = 1
	}
	hot := r.Owned("n00")
	for _, q := range hot[:len(hot)/2] {
		loads[q] = 3
	}
	loads[hot[len(hot)-1]] = math.NaN()
	loads[hot[len(hot)-2]] = math.Inf(1)
	loads[hot[len(hot)-3]] = -100
	pass := Plan(Input{Ring: r, Loads: loads, Now: time.Unix(0, 0)}, DefaultConfig())
	assert.False(t, math.IsNaN(pass.Before) || math.IsInf(pass.Before, 0), "imbalance %v", pass.Before)
	assert.Greater(t, pass.Before, DefaultConfig().Upper)
	require.NotEmpty(t, pass.Moves)
	for _, m := range pass.Moves {
		assert.Equal(t, "n00", m.From)
		assert.Equal(t, 3.0, m.Load)
	}
}

func other(r *ring.Ring, p int) string {
	o, _ := r.Owner(p)
	for _, id := range r.Members() {
		if id != o {
			return id
		}
	}
	return ""
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, DefaultConfig().Validate())
	for _, c := range []Config{
		{Upper: 1, Lower: 0.9, Budget: 0.01},
		{Upper: 1.15, Lower: 1, Budget: 0.01},
		{Upper: 1.15, Lower: 0.9, Budget: 0},
		{Upper: 1.15, Lower: 0.9, Budget: 0.01, Cooldown: -1},
		{Upper: math.NaN(), Lower: 0.9, Budget: 0.01},
	} {
		assert.ErrorIs(t, c.Validate(), ErrInvalidConfig, "%+v", c)
	}
}

// BenchmarkPlan is one pass over the scale target, 1,000 members
// and 4,096 partitions under Zipf-skewed load, from the ring's placement
// (the budget's 40 moves to plan).
func BenchmarkPlan(b *testing.B) {
	const n, p = 1000, 4096
	rng := rand.New(rand.NewPCG(3, 4))
	loads := make([]float64, p)
	for i := range loads {
		loads[i] = 1 / math.Pow(float64(1+rng.IntN(p)), 0.9)
	}
	in := Input{Ring: simRing(b, n, p, nil, nil), Loads: loads}
	cfg := DefaultConfig()
	b.ResetTimer()
	for b.Loop() {
		pass := Plan(in, cfg)
		if len(pass.Moves) == 0 {
			b.Fatal("no moves")
		}
	}
}

// shaped returns the input of a fleet of n equal members over p
// partitions where the member owning partition 0 (returned) carries
// aLoads on its partitions in order (the rest at 0) and every other member
// the same load, spread evenly over its partitions, the mean being 1.
func shaped(t *testing.T, n, p int, aLoads []float64) (Input, string) {
	r := simRing(t, n, p, nil, nil)
	a, _ := r.Owner(0)
	owned := map[string][]int{}
	for q := range p {
		id, _ := r.Owner(q)
		owned[id] = append(owned[id], q)
	}
	require.LessOrEqual(t, len(aLoads), len(owned[a]))
	loads := make([]float64, p)
	sum := 0.0
	for i, l := range aLoads {
		loads[owned[a][i]] = l
		sum += l
	}
	other := (float64(n) - sum) / float64(n-1)
	for id, qs := range owned {
		if id == a {
			continue
		}
		for _, q := range qs {
			loads[q] = other / float64(len(qs))
		}
	}
	return Input{Ring: r, Loads: loads, Now: time.Unix(1000, 0)}, a
}

// TestPlanNoiseMargin: a member above the upper band by less than its
// noise (its load mostly one heavy partition, whose measured rate errs
// most) triggers no pass, and one of many light partitions as far above
// does; with the margin off (NoiseMargin < 0, the rule of Plan without
// it) both do.
func TestPlanNoiseMargin(t *testing.T) {
	const n, p = 4, 128
	cfg := DefaultConfig()
	heavy, a := shaped(t, n, p, []float64{1.0, 0.12})
	light := make([]float64, 16)
	for i := range light {
		light[i] = 1.12 / 16
	}
	many, b := shaped(t, n, p, light)
	off := cfg
	off.NoiseMargin = -1
	for _, c := range []struct {
		name  string
		in    Input
		from  string
		cfg   Config
		moves bool
	}{
		{"one heavy partition", heavy, a, cfg, false},
		{"many light partitions", many, b, cfg, true},
		{"one heavy partition, no margin", heavy, a, off, true},
	} {
		pass := Plan(c.in, c.cfg)
		assert.InDelta(t, 1.12, pass.Before, 1e-9, c.name)
		if !c.moves {
			assert.Empty(t, pass.Moves, c.name)
			continue
		}
		require.NotEmpty(t, pass.Moves, c.name)
		assert.Equal(t, c.from, pass.Moves[0].From, c.name)
	}
}

// TestPlanCarriesOnWhileCooling: while a partition moved within the
// cooldown, a member above the band's middle by more than its noise is
// evened out (a pass that ran out of budget is carried on); with no
// partition cooling, the same fleet is left alone (it is within the
// band).
func TestPlanCarriesOnWhileCooling(t *testing.T) {
	const n, p = 4, 128
	cfg := DefaultConfig()
	loads := make([]float64, 24)
	for i := range loads {
		loads[i] = 1.065 / 24
	}
	in, a := shaped(t, n, p, loads)
	require.Less(t, 1.065, cfg.Upper)
	assert.Empty(t, Plan(in, cfg).Moves, "within the band, nothing cooling")
	for q := range p {
		if id, _ := in.Ring.Owner(q); id != a {
			in.Moved = map[int]time.Time{q: in.Now.Add(-cfg.Cooldown / 2)}
			break
		}
	}
	pass := Plan(in, cfg)
	require.NotEmpty(t, pass.Moves, "a partition cooling: carried on to the band's middle")
	assert.Equal(t, a, pass.Moves[0].From)
}
