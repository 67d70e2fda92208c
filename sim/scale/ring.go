package scale

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// RingFigures computes the ring-only figures at cfg.RingNodes x
// cfg.RingPartitions under cfg.RingAlgorithm, or with cfg.RingBoth under
// both ring algorithms side by side on the same samples: partitions moved by joins and leaves against the ideal over
// cfg.RingSamples random samples each, the time to build one ring, and the
// heap one ring holds. With cfg.RingHeavy k > 0, every k-th node and every
// k-th joiner has capacity weight 2. Zero fields of cfg take their
// defaults.
func RingFigures(cfg Config) (*RingReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := cfg.RingNodes
	weight := func(i int) int {
		if cfg.RingHeavy > 0 && i%cfg.RingHeavy == 0 {
			return 2
		}
		return 1
	}
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.Member{ID: fmt.Sprintf("node-%04d", i), Weight: weight(i)}
	}
	// The samples, drawn once and shared by both algorithms.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7363616c65)) // "scale"
	joins := make([][]ring.Member, cfg.RingSamples)
	leaves := make([][]ring.Member, 0, cfg.RingSamples)
	for i := range joins {
		joins[i] = append(slices.Clone(ms), ring.Member{ID: fmt.Sprintf("joiner-%d-%d", i, rng.Uint32()), Weight: weight(i)})
	}
	for range cfg.RingSamples {
		if n > 1 {
			i := rng.IntN(n)
			leaves = append(leaves, slices.Delete(slices.Clone(ms), i, i+1))
		}
	}
	rep := &RingReport{Nodes: n, Partitions: cfg.RingPartitions, Heavy: cfg.RingHeavy}
	want := ring.Config{Algorithm: cfg.RingAlgorithm}.Spec().RingAlgorithm // unset: a new fleet's
	algs := []ring.Algorithm{want}
	if cfg.RingBoth {
		algs = []ring.Algorithm{ring.AlgorithmBounded, ring.AlgorithmWeighted}
	}
	for _, alg := range algs {
		rc := ring.Config{Partitions: cfg.RingPartitions, LoadFactor: cfg.LoadFactor, Algorithm: alg}
		rf, err := ruleFigures(rc, ms, joins, leaves)
		if err != nil {
			return nil, err
		}
		rep.Rules = append(rep.Rules, *rf)
		if alg == want {
			rep.RuleFigures = *rf
		}
	}
	return rep, nil
}

// ruleFigures computes the figures of one ring algorithm.
func ruleFigures(rc ring.Config, ms []ring.Member, joins, leaves [][]ring.Member) (*RuleFigures, error) {
	n := len(ms)
	rf := &RuleFigures{Algorithm: rc.Spec().RingAlgorithm}

	// Build time: the mean over at least 5 builds and 200ms.
	var base *ring.Ring
	builds, start := 0, time.Now()
	for builds < 5 || time.Since(start) < 200*time.Millisecond {
		r, err := ring.NewWeighted(ms, rc)
		if err != nil {
			return nil, err
		}
		base = r
		builds++
	}
	rf.Build = time.Since(start) / time.Duration(builds)
	rf.FleetBuild = rf.Build * time.Duration(n)

	// Heap of one ring.
	before := heapAlloc()
	r, err := ring.NewWeighted(ms, rc)
	if err != nil {
		return nil, err
	}
	if after := heapAlloc(); after > before {
		rf.RingBytes = after - before
	}
	runtime.KeepAlive(r)

	// sample moves from base to each member list; the ideal of a change is
	// the ring weight of the member that came or went over the ring's
	// total weight with it, times P.
	sample := func(mv *Moves, lists [][]ring.Member, changed func(next *ring.Ring, i int) string) error {
		var moved, ideal float64
		for i, to := range lists {
			next, err := ring.NewWeighted(to, rc)
			if err != nil {
				return err
			}
			d, err := diffRings(base, next)
			if err != nil {
				return err
			}
			m := 0
			for _, c := range d {
				m += len(c.Gained)
			}
			big := base
			if len(to) > n {
				big = next
			}
			id := changed(next, i)
			total := 0
			for _, member := range big.Members() {
				total += big.Weight(member)
			}
			want := float64(rc.Partitions) * float64(big.Weight(id)) / float64(total)
			moved += float64(m)
			ideal += want
			mv.Max = max(mv.Max, m)
			mv.MaxRatio = max(mv.MaxRatio, float64(m)/want)
			mv.Samples++
		}
		if mv.Samples > 0 {
			mv.Mean, mv.Ideal = moved/float64(mv.Samples), ideal/float64(mv.Samples)
		}
		return nil
	}
	if err := sample(&rf.Join, joins, func(_ *ring.Ring, i int) string { return joins[i][n].ID }); err != nil {
		return nil, err
	}
	err = sample(&rf.Leave, leaves, func(next *ring.Ring, _ int) string {
		for _, m := range ms {
			if !slices.Contains(next.Members(), m.ID) {
				return m.ID
			}
		}
		return ""
	})
	return rf, err
}

// heapAlloc returns runtime.MemStats.HeapAlloc after a full GC.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
