package placement

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/tenure-go/tenure/ownership/ring"
)

// load is a workload's true rates: each unit's (key or tenant) rate and
// partition, and their sum per partition.
type load struct {
	units []unit
	parts []float64
}

// unit is one key or tenant.
type unit struct {
	partition int
	rate      float64
}

// newLoad computes w's rates over cfg.Partitions partitions, each unit
// hashed to its partition by ring.PartitionOf, the fleet's own function.
// The rates add up to 1.
func newLoad(cfg Config, w Workload) *load {
	var names func(i int) string
	var rates []float64
	switch w {
	case Tenants:
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x7e))
		rates = make([]float64, cfg.Tenants)
		for i := range rates {
			rates[i] = math.Exp(rng.Float64() * math.Log(cfg.TenantMax))
		}
		names = func(i int) string { return "tenant-" + strconv.Itoa(i) }
	default:
		rates = make([]float64, cfg.Keys)
		for i := range rates {
			rates[i] = math.Pow(float64(i+1), -cfg.ZipfS)
		}
		names = func(i int) string { return "key-" + strconv.Itoa(i) }
	}
	total := 0.0
	for _, r := range rates {
		total += r
	}
	l := &load{units: make([]unit, len(rates)), parts: make([]float64, cfg.Partitions)}
	for i, r := range rates {
		p := ring.PartitionOf(names(i), cfg.Partitions)
		l.units[i] = unit{partition: p, rate: r / total}
		l.parts[p] += r / total
	}
	return l
}

// heat returns a copy of l's partition rates with unit i's rate set to
// rate.
func (l *load) heat(i int, rate float64) []float64 {
	parts := append([]float64(nil), l.parts...)
	u := l.units[i]
	parts[u.partition] += rate - u.rate
	return parts
}
