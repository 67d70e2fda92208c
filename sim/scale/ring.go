package scale

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/tenure-go/tenure/ring"
)

// RingFigures computes the ring-only figures at cfg.RingNodes x
// cfg.RingPartitions: partitions moved by joins and leaves against the
// ideal over cfg.RingSamples random samples each, the time to build one
// ring, and the heap one ring holds. Zero fields of cfg take their
// defaults.
func RingFigures(cfg Config) (*RingReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rc := ring.Config{Partitions: cfg.RingPartitions, LoadFactor: cfg.LoadFactor, Algorithm: cfg.RingAlgorithm}
	n := cfg.RingNodes
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%04d", i)
	}
	rep := &RingReport{Nodes: n, Partitions: cfg.RingPartitions}

	// Build time: the mean over at least 5 builds and 200ms.
	var base *ring.Ring
	builds, start := 0, time.Now()
	for builds < 5 || time.Since(start) < 200*time.Millisecond {
		r, err := ring.New(ids, rc)
		if err != nil {
			return nil, err
		}
		base = r
		builds++
	}
	rep.Build = time.Since(start) / time.Duration(builds)
	rep.FleetBuild = rep.Build * time.Duration(n)

	// Heap of one ring.
	before := heapAlloc()
	r, err := ring.New(ids, rc)
	if err != nil {
		return nil, err
	}
	if after := heapAlloc(); after > before {
		rep.RingBytes = after - before
	}
	runtime.KeepAlive(r)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7363616c65)) // "scale"
	moved := func(to []string) (int, error) {
		next, err := ring.New(to, rc)
		if err != nil {
			return 0, err
		}
		d, err := diffRings(base, next)
		if err != nil {
			return 0, err
		}
		m := 0
		for _, c := range d {
			m += len(c.Gained)
		}
		return m, nil
	}
	sample := func(mv *Moves, ideal float64, members func(i int) []string) error {
		mv.Ideal = ideal
		total := 0
		for i := range cfg.RingSamples {
			m, err := moved(members(i))
			if err != nil {
				return err
			}
			total += m
			mv.Max = max(mv.Max, m)
			mv.Samples++
		}
		if mv.Samples > 0 {
			mv.Mean = float64(total) / float64(mv.Samples)
		}
		return nil
	}
	p := float64(cfg.RingPartitions)
	err = sample(&rep.Join, p/float64(n+1), func(i int) []string {
		return append(slices.Clone(ids), fmt.Sprintf("joiner-%d-%d", i, rng.Uint32()))
	})
	if err != nil {
		return nil, err
	}
	if n > 1 {
		err = sample(&rep.Leave, p/float64(n), func(int) []string {
			i := rng.IntN(n)
			return slices.Delete(slices.Clone(ids), i, i+1)
		})
	}
	return rep, err
}

// heapAlloc returns runtime.MemStats.HeapAlloc after a full GC.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
