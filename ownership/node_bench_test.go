package ownership

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

const lookupKeys = 4096 // a power of two: index with & (lookupKeys-1)

// BenchmarkNodeLookup measures key -> route on a Node (atomic snapshot
// load, partition hash, route copy) next to the bare Ring lookup it builds
// on, and Hold+Release, the admission of local work.
func BenchmarkNodeLookup(b *testing.B) {
	const parts = 1024
	c := cluster.New(b, 1)
	n := join(b, c.NewClient(b), testConfig(b, "bench-lookup", "a", parts))
	waitStable(b, 30*time.Second, n)
	keys := make([]string, lookupKeys)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i*7919) + "/order"
	}
	rg := n.Ring()
	b.Run("node", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r := n.Lookup(keys[i&(lookupKeys-1)])
			if !r.Local {
				b.Fatal("not local")
			}
			i++
		}
	})
	b.Run("ring", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := rg.Owner(ring.PartitionOf(keys[i&(lookupKeys-1)], rg.Partitions())); !ok {
				b.Fatal("no owner")
			}
			i++
		}
	})
	b.Run("hold", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h, err := n.Hold(keys[i&(lookupKeys-1)])
			if err != nil {
				b.Fatal(err)
			}
			h.Release()
			i++
		}
	})
	b.Run("node-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				n.Lookup(keys[i&(lookupKeys-1)])
				i++
			}
		})
	})
}

// BenchmarkFailover measures how long the partitions of a departing node
// stay unserved: from the moment the fourth of 4 nodes (1024 partitions,
// session TTL 2s) leaves until the 3 others serve all 1024 partitions.
// "leave" is a graceful Close (handoff); "kill" closes the node's etcd
// client, as a crash would, so the others wait for its lease to expire.
// Each iteration joins a fresh fourth node first (not timed). Reports the
// median in ms; run with -benchtime=Nx.
func BenchmarkFailover(b *testing.B) {
	c := cluster.New(b, 3)
	const name, parts = "bench-failover", 1024
	var stay []*Node
	for i := range 3 {
		stay = append(stay, join(b, c.NewClient(b), testConfig(b, name, fmt.Sprintf("s%d", i), parts)))
	}
	waitStable(b, 60*time.Second, stay...)
	seq := 0
	for _, mode := range []string{"leave", "kill"} {
		b.Run(mode, func(b *testing.B) {
			var samples []time.Duration
			for b.Loop() {
				b.StopTimer()
				cli, _ := c.NewFaultyClient(b)
				cfg := testConfig(b, name, fmt.Sprintf("d%d", seq), parts)
				seq++
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				d, err := Join(ctx, cli, cfg)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				waitStable(b, 60*time.Second, append(slices.Clone(stay), d)...)
				b.StartTimer()

				start := time.Now()
				closed := make(chan error, 1)
				if mode == "leave" {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						closed <- d.Close(ctx)
					}()
				} else {
					_ = cli.Close()
				}
				waitStable(b, 60*time.Second, stay...)
				samples = append(samples, time.Since(start))

				b.StopTimer()
				if mode == "leave" {
					if err := <-closed; err != nil {
						b.Fatal(err)
					}
				} else {
					closeNode(b, d)
				}
				b.StartTimer()
			}
			slices.Sort(samples)
			b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "max-ms")
		})
	}
}
