package ownership

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// BenchmarkPlannedMove moves one partition back and forth between two
// nodes with an operator's pin, and measures a move's critical path: from
// the old owner's OnReleased (its drain over) to the new owner's
// OnAcquired (claimed and fenced; no Fencers here). handover: the fleet
// requires the handover feature; delete: both nodes lack it, so the old
// owner deletes its claim and the new one creates it. It reports the
// median (p50-ms) and the claim writes per move (writes/move). Run both
// with -count to interleave them:
//
//	go test -count=3 -run '^$' -bench PlannedMove -benchtime 40x ./ownership
func BenchmarkPlannedMove(b *testing.B) {
	for _, mode := range []string{"handover", "delete"} {
		b.Run(mode, func(b *testing.B) { benchMove(b, mode == "handover") })
	}
}

func benchMove(b *testing.B, handover bool) {
	const P, p = 8, 0
	c := cluster.New(b, 1)
	cli := c.NewClient(b)
	name := "bench-move"
	released := make(chan time.Time, 4)
	acquired := make(chan time.Time, 4)
	cfg := func(id string) Config {
		cfg := testConfig(b, name, id, P)
		cfg.Callbacks = Callbacks{
			OnReleased: func(e Event) {
				if e.Partition == p {
					released <- time.Now()
				}
			},
			OnAcquired: func(e Event) {
				if e.Partition == p {
					acquired <- time.Now()
				}
			},
		}
		if !handover {
			cfg = olderBuild(cfg, slices.DeleteFunc(fleetview.Features(), func(f string) bool { return f == fleetview.FeatureHandover })...)
		}
		return cfg
	}
	n1 := join(b, cli, cfg("n1"))
	n2 := join(b, cli, cfg("n2"))
	waitStable(b, 30*time.Second, n1, n2)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := n1.LookupPartition(p).Owner // stable: then each move's end is awaited
	drain := func() {
		for {
			select {
			case <-released:
			case <-acquired:
			default:
				return
			}
		}
	}
	move := func() time.Duration {
		to := "n1"
		if holder == "n1" {
			to = "n2"
		}
		holder = to
		if _, err := op.Pin(ctx, p, to, fleet.Action{Actor: "bench", Reason: "move"}); err != nil {
			b.Fatal(err)
		}
		var rel time.Time
		for {
			select {
			case rel = <-released:
			case acq := <-acquired:
				if rel.IsZero() { // both were ready: select took this one
					rel = <-released
				}
				if acq.Before(rel) {
					b.Fatal("acquired before the release")
				}
				return acq.Sub(rel)
			case <-ctx.Done():
				b.Fatal("the move did not complete")
			}
		}
	}
	drain()
	move() // records placements, and (handover) the handover feature on the way
	if handover {
		waitRequires(b, cli, name, fleetview.FeatureHandover)
	}
	start, err := cli.Get(ctx, keys.New(name).Claim(p))
	if err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, move())
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-ms")
	writes := len(watchedEvents(b, cli, keys.New(name).Claim(p), start.Header.Revision))
	b.ReportMetric(float64(writes)/float64(b.N), "writes/move")
}
