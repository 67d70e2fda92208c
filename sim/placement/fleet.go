package placement

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tenure-go/tenure/internal/loadmeter"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/ring"
)

// epoch is the virtual clock's origin.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fleet is a simulated fleet under the balancer: its ring, the balancer's
// moves and the owners' load meters, on virtual time.
type fleet struct {
	cfg    Config
	exact  bool // the balancer sees the true rates, unsmoothed and without noise
	base   *ring.Ring
	ring   *ring.Ring // base with the moves placed
	moves  map[int]string
	moved  map[int]time.Time
	truth  []float64                   // true rate of each partition
	meters map[string]*loadmeter.Meter // each member's load meter, ownership's
	owned  map[string][]int            // each member's partitions on ring
	rng    *rand.Rand
	now    time.Duration
	passes int // passes run
}

// newFleet returns the fleet of n members (every cfg.HeavyEvery-th at
// weight 2 if weighted) on the ring alone (no placements), its meters warmed up to
// the true rates (a window's worth of ticks).
func newFleet(cfg Config, n int, weighted, exact bool, truth []float64, seed uint64) (*fleet, error) {
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.Member{ID: fmt.Sprintf("node-%03d", i), Weight: 1}
		if weighted && i%cfg.HeavyEvery == 0 {
			ms[i].Weight = 2
		}
	}
	r, err := ring.NewWeighted(ms, ring.Config{Partitions: cfg.Partitions, LoadFactor: cfg.LoadFactor, Algorithm: ring.AlgorithmWeighted})
	if err != nil {
		return nil, err
	}
	f := &fleet{cfg: cfg, exact: exact, base: r, ring: r, moves: map[int]string{}, moved: map[int]time.Time{},
		truth: truth, meters: map[string]*loadmeter.Meter{}, rng: rand.New(rand.NewPCG(seed, uint64(n)))}
	for _, m := range ms {
		f.meters[m.ID] = loadmeter.New(cfg.Partitions)
	}
	f.own()
	if !exact {
		for t := time.Duration(0); t <= cfg.LoadWindow; t += cfg.LoadInterval {
			f.tick()
		}
	}
	return f, nil
}

// unitsPerSecond is the fleet's total rate in the units the meters count
// (the true rates add up to 1).
const unitsPerSecond = 1e7

// own sets every member's partitions from the fleet's ring.
func (f *fleet) own() {
	f.owned = make(map[string][]int, len(f.meters))
	for p := range f.truth {
		id, _ := f.ring.Owner(p)
		f.owned[id] = append(f.owned[id], p)
	}
}

// passStats is what a stretch of passes did.
type passStats struct {
	passes     int // passes that moved something
	last       int // the last of them, counted from the stretch's start (0: none)
	moves      int
	maxPerPass int
	maxImb     float64 // the highest true imbalance seen at a pass
}

// run advances the fleet by d of virtual time: the meters tick every
// LoadInterval, and a pass runs every balancer interval. until, if set,
// is asked after every pass and ends the stretch early when it says so.
func (f *fleet) run(d time.Duration, until func() bool) passStats {
	var st passStats
	start, first := f.now, f.passes
	for f.now < start+d {
		f.now += f.cfg.LoadInterval
		f.tick()
		if f.now%f.cfg.Balance.Interval != 0 {
			continue
		}
		st.maxImb = max(st.maxImb, f.imbalance(f.truth))
		n := f.pass()
		if n > 0 {
			st.passes++
			st.last = f.passes - first
			st.moves += n
			st.maxPerPass = max(st.maxPerPass, n)
		}
		if until != nil && until() {
			break
		}
	}
	return st
}

// tick counts one LoadInterval of work at every partition's owner (the
// true rate times the noise, in units) and ticks every member's meter, as
// ownership's publisher does. A partition moved by the last pass is
// served by its new owner from the pass on, so the new owner's next tick
// finds it newly served and discards it (in a real fleet the handoff
// takes part of that interval), and its first full tick follows.
func (f *fleet) tick() {
	if f.exact {
		return
	}
	secs := f.cfg.LoadInterval.Seconds()
	for p, t := range f.truth {
		id, _ := f.ring.Owner(p)
		rate := t * (1 + f.cfg.Noise*(2*f.rng.Float64()-1))
		f.meters[id].Add(p, uint64(math.Round(rate*unitsPerSecond*secs)))
	}
	for id, m := range f.meters {
		m.Tick(f.cfg.LoadInterval, f.cfg.LoadWindow, f.owned[id])
	}
}

// loads returns the load of every partition as the balancer reads it: its
// owner's reported rate (the true rate in an exact fleet).
func (f *fleet) loads() []float64 {
	if f.exact {
		return slices.Clone(f.truth)
	}
	loads := make([]float64, len(f.truth))
	for p := range loads {
		id, _ := f.ring.Owner(p)
		loads[p] = loadmeter.Round3(f.meters[id].Rate(p))
	}
	return loads
}

// pass runs one balancer pass over the owners' reports and applies it as
// the Balancer does; it returns the moves made.
func (f *fleet) pass() int {
	f.passes++
	now := epoch.Add(f.now)
	in := balance.Input{Ring: f.ring, Loads: f.loads(), Moves: maps.Clone(f.moves), Moved: f.moved, Now: now}
	pass := balance.Plan(in, f.cfg.Balance)
	if len(pass.Moves) == 0 && len(pass.Removes) == 0 {
		return 0
	}
	for _, p := range pass.Removes {
		delete(f.moves, p)
	}
	for _, m := range pass.Moves {
		f.moves[m.Partition] = m.To
		f.moved[m.Partition] = now
	}
	pl := make([]ring.Placement, 0, len(f.moves))
	for p, id := range f.moves {
		pl = append(pl, ring.Placement{Partition: p, Node: id})
	}
	f.ring = f.base.Place(pl)
	f.own()
	return len(pass.Moves)
}

// perWeight returns every member's load per unit of weight under parts,
// and the mean.
func (f *fleet) perWeight(r *ring.Ring, parts []float64) (map[string]float64, float64) {
	load := map[string]float64{}
	total := 0.0
	for p, l := range parts {
		id, _ := r.Owner(p)
		load[id] += l
		total += l
	}
	weight := 0
	out := make(map[string]float64, len(r.Members()))
	for _, id := range r.Members() {
		w := r.Weight(id)
		weight += w
		out[id] = load[id] / float64(w)
	}
	return out, total / float64(weight)
}

// imbalance is the largest load per weight over the mean, on the fleet's
// placement.
func (f *fleet) imbalance(parts []float64) float64 { return imbalanceOf(f, f.ring, parts) }

func imbalanceOf(f *fleet, r *ring.Ring, parts []float64) float64 {
	pw, mean := f.perWeight(r, parts)
	top := 0.0
	for _, v := range pw {
		top = max(top, v)
	}
	return top / mean
}

// weightRatio is the mean load of the weight-2 members over the mean load
// of the weight-1 members (0 if the fleet has one kind only).
func (f *fleet) weightRatio(r *ring.Ring, parts []float64) float64 {
	pw, _ := f.perWeight(r, parts)
	var sum [3]float64
	var count [3]int
	for id, v := range pw {
		w := r.Weight(id)
		if w > 2 {
			continue
		}
		sum[w] += v * float64(w)
		count[w]++
	}
	if count[1] == 0 || count[2] == 0 {
		return 0
	}
	return (sum[2] / float64(count[2])) / (sum[1] / float64(count[1]))
}

// bound is the lower bound of the imbalance under parts: the heaviest
// partition on the heaviest-weighted member, over the mean load per
// weight (at least 1).
func (f *fleet) bound(parts []float64) float64 {
	_, mean := f.perWeight(f.base, parts)
	top, w := 0.0, 1
	for _, l := range parts {
		top = max(top, l)
	}
	for _, id := range f.base.Members() {
		w = max(w, f.base.Weight(id))
	}
	return max(1, top/float64(w)/mean)
}

// meanPerWeight is the mean load per unit of weight under parts.
func (f *fleet) meanPerWeight(parts []float64) float64 {
	_, mean := f.perWeight(f.base, parts)
	return mean
}

// goal is the target for an imbalance under bound: 1.10, or
// within 5% of the bound where the bound is above 1.05.
func goal(bound float64) float64 {
	if bound > 1.05 {
		return max(1.10, 1.05*bound)
	}
	return 1.10
}
