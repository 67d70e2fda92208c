// Command scale runs tenure's scale simulation (package sim/scale) and
// prints its figures as markdown.
//
//	go run ./sim/scale/cmd/scale -nodes 1000 -partitions 4096
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/tenure-go/tenure/sim/scale"
)

func main() {
	cfg := scale.DefaultConfig()
	flag.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "live fleet size")
	flag.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the live fleet")
	flag.IntVar(&cfg.Restarts, "restarts", 0, "nodes restarted by the rolling restart (0: all)")
	flag.IntVar(&cfg.RingNodes, "ring-nodes", cfg.RingNodes, "nodes of the ring-only figures")
	flag.IntVar(&cfg.RingPartitions, "ring-partitions", cfg.RingPartitions, "partitions of the ring-only figures")
	flag.IntVar(&cfg.RingSamples, "ring-samples", cfg.RingSamples, "joins and leaves sampled for the ring-only figures")
	flag.BoolVar(&cfg.RingOnly, "ring-only", false, "compute the ring-only figures only")
	flag.BoolVar(&cfg.SkipRing, "skip-ring", false, "skip the ring-only figures")
	flag.Float64Var(&cfg.LoadFactor, "load", cfg.LoadFactor, "load factor")
	flag.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "session TTL")
	flag.DurationVar(&cfg.Step, "step", cfg.Step, "virtual clock step")
	flag.DurationVar(&cfg.Quiet, "quiet", cfg.Quiet, "wall time without activity before the clock advances")
	flag.DurationVar(&cfg.WaitTimeout, "wait", cfg.WaitTimeout, "wall-time bound of each wait for a stable ring")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()
	if !*quiet {
		cfg.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := scale.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}
