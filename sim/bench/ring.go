package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/buraksezer/consistent"

	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/scale"
)

// ringNodes and ringPartitions size the ring figures.
const ringNodes, ringPartitions = 1000, 4096

func runRing(ctx context.Context, e *env) ([]Section, error) {
	cfg := e.cfg
	samples := cfg.scaled(50, 5)
	rounds := cfg.rounds()
	var builds, bytes, joins, joinMax, leaves, leaveMax []float64
	var last *scale.RingReport
	// consistent.New at the same size, interleaved with tenure's rounds.
	var cBuilds, cBytes []float64
	ids := make([]consistent.Member, ringNodes)
	for i := range ids {
		ids[i] = ringMember(fmt.Sprintf("node-%04d", i))
	}
	rc := ring.DefaultConfig()
	consBuild := func() (float64, float64) {
		before := heap()
		start := time.Now()
		c := consistent.New(ids, consistent.Config{Hasher: xxhasher{}, PartitionCount: ringPartitions, ReplicationFactor: consistentReplicas, Load: rc.LoadFactor})
		d := time.Since(start)
		after := heap()
		runtime.KeepAlive(c)
		return float64(d.Microseconds()) / 1000, float64(after-before) / (1 << 20)
	}
	for r := range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tenure := func() error {
			rep, err := scale.RingFigures(scale.Config{RingOnly: true, RingNodes: ringNodes, RingPartitions: ringPartitions, RingSamples: samples, Seed: uint64(r)})
			if err != nil {
				return err
			}
			last = rep
			builds = append(builds, float64(rep.Build.Microseconds())/1000)
			bytes = append(bytes, float64(rep.RingBytes)/(1<<20))
			joins = append(joins, rep.Join.Mean)
			joinMax = append(joinMax, float64(rep.Join.Max))
			leaves = append(leaves, rep.Leave.Mean)
			leaveMax = append(leaveMax, float64(rep.Leave.Max))
			return nil
		}
		cons := func() {
			if r >= cfg.scaled(3, 1) { // seconds per build: a few suffice
				return
			}
			b, m := consBuild()
			cBuilds = append(cBuilds, b)
			cBytes = append(cBytes, m)
		}
		if r%2 == 0 {
			if err := tenure(); err != nil {
				return nil, err
			}
			cons()
		} else {
			cons()
			if err := tenure(); err != nil {
				return nil, err
			}
		}
	}
	b, cb := median(builds), median(cBuilds)
	m, cm := median(bytes), median(cBytes)
	ji, li := last.Join.Ideal, last.Leave.Ideal
	row := func(name string, v, ref float64, n int, note string) Row {
		return Row{Name: name, Value: v, Allocs: -1, Ratio: ratio(v, ref), Samples: n, Note: note}
	}
	build := Section{
		Key:   "ring",
		Title: fmt.Sprintf("Ring of %d members x %d partitions: build time and memory", ringNodes, ringPartitions),
		Intro: fmt.Sprintf("Load factor %.2f. tenure's figures are its %v ring's (a new fleet's algorithm), from `scale.RingFigures` (build time: the mean of at least 5 builds per round); consistent.New builds the ring of tenure's bounded algorithm over the same members (%d points per member). %d rounds interleaved.", rc.LoadFactor, last.Algorithm, consistentReplicas, rounds),
		Unit:  "value",
		Rows: []Row{
			row("tenure `ring.New`: build (ms)", b, b, len(builds), fmt.Sprintf("every node rebuilds on each membership change: %.1f s of CPU across the fleet", b*ringNodes/1000)),
			row("buraksezer/consistent `New`: build (ms)", cb, b, len(cBuilds), "re-sorts all points after adding each member: quadratic in members"),
			row("tenure: heap held by one ring (MiB)", m, m, len(bytes), ""),
			row("buraksezer/consistent: heap held (MiB)", cm, m, len(cBytes), ""),
		},
	}
	moves := Section{
		Key:         "ring",
		Title:       fmt.Sprintf("Partitions moved per membership change (%d members x %d partitions)", ringNodes, ringPartitions),
		Intro:       fmt.Sprintf("tenure's %v ring. %d random joins and %d random leaves per round, %d rounds; ideal = P/N of the larger fleet.", last.Algorithm, samples, samples, rounds),
		Unit:        "partitions",
		RatioHeader: "x ideal",
		Rows: []Row{
			row("join: mean moved", median(joins), ji, len(joins), fmt.Sprintf("ideal %.2f", ji)),
			row("join: max moved", median(joinMax), ji, len(joinMax), ""),
			row("leave: mean moved", median(leaves), li, len(leaves), fmt.Sprintf("ideal %.2f", li)),
			row("leave: max moved", median(leaveMax), li, len(leaveMax), ""),
		},
	}
	return []Section{build, moves}, nil
}

func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
