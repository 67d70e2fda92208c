package placement

import (
	"context"
	"math/rand/v2"
	"time"
)

// Row is the figures of one fleet under one workload.
type Row struct {
	Nodes    int
	Weighted bool // every Config.HeavyEvery-th node has weight 2
	Workload Workload
	// Bound is the lower bound of the imbalance; Goal the target
	// under it.
	Bound, Goal float64
	// Ring is the imbalance of the ring alone (no balancer).
	Ring float64
	// Exact is the balancer converging on the true rates (no smoothing,
	// no noise): the pure pass.
	Exact Converged
	// Observed is the balancer converging on the rates the nodes publish
	// (smoothed, with noise).
	Observed Converged
	// SteadyMoves is the moves per hour under stationary load with noise
	// after Observed converged; SteadyMax the highest imbalance at a pass
	// meanwhile.
	SteadyMoves float64
	SteadyMax   float64
	// WeightRatio is the mean load of a weight-2 node over the mean load
	// of a weight-1 node, under the ring alone and under the balancer (0
	// in the equal fleets).
	WeightRatioRing, WeightRatio float64
	// Hot is the hot tenant's figures.
	Hot HotTenant
}

// Converged is a convergence from the ring's placement.
type Converged struct {
	// Passes is the passes up to the last that moved a partition, Moving
	// those that moved any; Moves the partitions moved, MaxPerPass the
	// most in one pass.
	Passes, Moving, Moves, MaxPerPass int
	// Within is the first pass after which the imbalance was within the
	// goal (0: already before; -1: never).
	Within int
	// Imbalance is the imbalance after the last pass.
	Imbalance float64
}

// HotTenant is what happened when one tenant's rate jumped.
type HotTenant struct {
	// Rate is the tenant's rate after the jump over the mean load per
	// unit of weight before it.
	Rate float64
	// Bound and Goal are the lower bound and the target after the jump;
	// Ring the imbalance of the ring alone after it.
	Bound, Goal, Ring float64
	// Peak is the imbalance right after the jump.
	Peak float64
	// Recovered is the virtual time from the jump until a pass found the
	// imbalance within Goal; Within false if it never did within
	// Config.HotWindow.
	Recovered time.Duration
	Within    bool
	// Passes and Moves are the passes that moved partitions and the moves
	// until then.
	Passes, Moves int
	// Imbalance is the imbalance at the end.
	Imbalance float64
}

// Run measures every fleet size, with equal and unequal weights, under
// every workload. progress, if set, is called with each row as it is
// done.
func Run(ctx context.Context, cfg Config, progress func(Row)) ([]Row, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var rows []Row
	for _, w := range cfg.Workloads {
		l := newLoad(cfg, w)
		for _, n := range cfg.Fleets {
			for _, weighted := range []bool{false, true} {
				if err := ctx.Err(); err != nil {
					return rows, err
				}
				row, err := measure(cfg, l, w, n, weighted)
				if err != nil {
					return rows, err
				}
				rows = append(rows, row)
				if progress != nil {
					progress(row)
				}
			}
		}
	}
	return rows, nil
}

// measure runs one row.
func measure(cfg Config, l *load, w Workload, n int, weighted bool) (Row, error) {
	seed := cfg.Seed*1000 + uint64(n)*2
	if weighted {
		seed++
	}
	row := Row{Nodes: n, Weighted: weighted, Workload: w}
	exact, err := newFleet(cfg, n, weighted, true, l.parts, seed)
	if err != nil {
		return row, err
	}
	row.Bound = exact.bound(l.parts)
	row.Goal = goal(row.Bound)
	row.Ring = exact.imbalance(l.parts)
	row.WeightRatioRing = exact.weightRatio(exact.base, l.parts)
	row.Exact = converge(exact, cfg, row.Goal)

	f, err := newFleet(cfg, n, weighted, false, l.parts, seed)
	if err != nil {
		return row, err
	}
	row.Observed = converge(f, cfg, row.Goal)
	row.WeightRatio = f.weightRatio(f.ring, l.parts)
	if cfg.Steady > 0 {
		st := f.run(cfg.Steady, nil)
		row.SteadyMoves = float64(st.moves) * float64(time.Hour) / float64(cfg.Steady)
		row.SteadyMax = st.maxImb
	}

	// The hot tenant: a unit drawn by the seed jumps to cfg.Hot times the
	// mean load per unit of weight.
	i := rand.New(rand.NewPCG(seed, 0x407)).IntN(len(l.units))
	rate := cfg.Hot * f.meanPerWeight(l.parts)
	hot := l.heat(i, rate)
	h := HotTenant{Rate: rate / f.meanPerWeight(l.parts), Bound: f.bound(hot), Ring: imbalanceOf(f, f.base, hot)}
	h.Goal = goal(h.Bound)
	f.truth = hot
	h.Peak = f.imbalance(hot)
	t0 := f.now
	if h.Peak <= h.Goal {
		h.Within = true
	} else if cfg.HotWindow > 0 {
		st := f.run(cfg.HotWindow, func() bool { return f.imbalance(hot) <= h.Goal })
		h.Passes, h.Moves = st.passes, st.moves
		if f.imbalance(hot) <= h.Goal {
			h.Within, h.Recovered = true, f.now-t0
		}
	}
	h.Imbalance = f.imbalance(hot)
	row.Hot = h
	return row, nil
}

// converge runs f's balancer for cfg.Converge, pass by pass, from the
// ring's placement.
func converge(f *fleet, cfg Config, goal float64) Converged {
	c := Converged{Within: -1}
	if f.imbalance(f.truth) <= goal {
		c.Within = 0
	}
	for i := 1; time.Duration(i)*cfg.Balance.Interval <= cfg.Converge; i++ {
		st := f.run(cfg.Balance.Interval, nil)
		if st.moves > 0 {
			c.Passes, c.Moving = i, c.Moving+1
			c.Moves += st.moves
			c.MaxPerPass = max(c.MaxPerPass, st.moves)
		}
		if c.Within < 0 && f.imbalance(f.truth) <= goal {
			c.Within = i
		}
	}
	c.Imbalance = f.imbalance(f.truth)
	return c
}
