// Command sim runs tenure's simulation under virtual time: the strategies
// (tenure and the unfenced baselines) through one seeded fault schedule and
// workload each, checked by sim/check, and prints a table per strategy.
//
//	go run ./sim                              # 100 seeds of every strategy
//	go run ./sim -seeds 500 -out sim.md -svg sim.svg
//	go run ./sim -seed 42 -strategy tenure -v # replay one seed, with its schedule and violations
//	go run ./sim scale -nodes 200             # fleet-scale figures on virtual time (see sim/scale)
//	go run ./sim bench -out bench.md -svg bench.svg # tenure against its baselines, side by side (see sim/bench)
//	go run ./sim chaos                        # real processes, real etcd, real faults (see sim/chaos)
//	go run ./sim placement -out sim/placement/RESULTS.md # the balancer on virtual time (see sim/placement)
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/tenure-go/tenure/sim/bench"
	"github.com/tenure-go/tenure/sim/chaos"
	"github.com/tenure-go/tenure/sim/placement"
	"github.com/tenure-go/tenure/sim/scale"
	"github.com/tenure-go/tenure/sim/scenario"
	"github.com/tenure-go/tenure/sim/simulation"
)

// options are the command line's settings.
type options struct {
	seed                                  int64
	seeds, parallel                       int
	first                                 uint64
	strategy                              string
	out, svg                              string
	verbose, corpus                       bool
	nodes, faults, spins                  int
	floorRaises, reshapes, successorKills int
	duration, yield                       time.Duration
}

// subcommands are the programs besides the simulation: go run ./sim NAME
// [flags].
var subcommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"bench":     bench.Command,
	"chaos":     chaos.Command,
	"placement": placement.Command,
	"scale":     scale.Command,
}

func main() {
	if len(os.Args) > 1 {
		if cmd, ok := subcommands[os.Args[1]]; ok {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			err := cmd(ctx, os.Args[2:], os.Stdout, os.Stderr)
			stop()
			if err != nil {
				fmt.Fprintf(os.Stderr, "sim %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	var o options
	flag.Int64Var(&o.seed, "seed", -1, "run this one seed (with -v: print its schedule and violations)")
	flag.IntVar(&o.seeds, "seeds", 100, "number of seeds per strategy")
	flag.Uint64Var(&o.first, "first", 1, "first seed")
	flag.StringVar(&o.strategy, "strategy", "tenure,redislock,etcdmutex", "comma-separated strategies (tenure, redislock, etcdmutex, tenure-unfenced) or all")
	flag.IntVar(&o.nodes, "nodes", 0, "nodes (0: default)")
	flag.IntVar(&o.faults, "faults", 0, "faults per run (0: default)")
	flag.IntVar(&o.floorRaises, "floor-raises", 0, "floors raised per tenure run by a writer outside the fleet (0: default; negative: none)")
	flag.IntVar(&o.reshapes, "reshapes", 0, "shape changes per tenure run: resizes of the partition count, migrations of the ring algorithm (0: default; negative: none)")
	flag.IntVar(&o.successorKills, "successor-kills", 0, "successors stopped in the middle of a claim's hand-over per tenure run (0: default; negative: none)")
	flag.DurationVar(&o.duration, "duration", 0, "virtual duration of a run (0: default)")
	flag.IntVar(&o.parallel, "parallel", 0, "runs at once (0: GOMAXPROCS)")
	flag.StringVar(&o.out, "out", "", "also write the markdown table to this file")
	flag.StringVar(&o.svg, "svg", "", "write an SVG plot of violations and unavailability to this file")
	flag.BoolVar(&o.verbose, "v", false, "print every failing run's schedule and violations")
	flag.BoolVar(&o.corpus, "corpus", false, "also replay the regression corpus (sim/scenario) and print its table")
	flag.DurationVar(&o.yield, "yield", 0, "real time the driver sleeps per step (0: default; negative: none)")
	flag.IntVar(&o.spins, "spins", 0, "least scheduler yields per step (0: default)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	seed, seeds, first, parallel, verbose := o.seed, o.seeds, o.first, o.parallel, o.verbose
	var strategies []simulation.Strategy
	if o.strategy == "all" {
		strategies = simulation.Strategies()
	} else {
		for _, s := range strings.Split(o.strategy, ",") {
			st, err := simulation.ParseStrategy(strings.TrimSpace(s))
			if err != nil {
				return err
			}
			strategies = append(strategies, st)
		}
	}
	cfg := simulation.DefaultConfig()
	if o.spins > 0 {
		cfg.Spins = o.spins
	}
	if o.yield != 0 {
		cfg.Yield = o.yield
	}
	if o.nodes > 0 {
		cfg.Nodes = o.nodes
	}
	if o.faults > 0 {
		cfg.Faults = o.faults
	}
	if o.floorRaises != 0 {
		cfg.FloorRaises = o.floorRaises
	}
	if o.reshapes != 0 {
		cfg.Reshapes = o.reshapes
	}
	if o.successorKills != 0 {
		cfg.SuccessorKills = o.successorKills
	}
	if o.duration > 0 {
		cfg.Duration = o.duration
	}
	if seed >= 0 {
		first, seeds = uint64(seed), 1
		verbose = true
	}
	start := time.Now()
	progress := func(r *simulation.Result) {
		if r.OK() {
			return
		}
		fmt.Printf("FAIL seed %d %s: %s\n  replay: %s\n", r.Config.Seed, r.Config.Strategy, r.Report.Summary(), r.Command())
		if verbose {
			fmt.Print(indent(r.Schedule.String()))
			vs := append(r.Disagreed, r.Report.Violations()...)
			for i, v := range vs {
				if i == 20 {
					fmt.Printf("  ... %d more\n", len(vs)-i)
					break
				}
				fmt.Println("  " + v)
			}
		}
	}
	totals, err := simulation.RunSeeds(cfg, strategies, first, seeds, parallel, progress)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	var md bytes.Buffer
	fmt.Fprintf(&md, "Seeds %d..%d, %d nodes, %d partitions, %d keys, %d clients, TTL %v, %v of virtual time and %d faults per run (and %d floor raises by a writer outside the fleet and %d shape changes, resizes of the partition count or migrations of the ring algorithm, per tenure run); liveness bound %v after the last fault heals (or shape change ends).\n\n",
		first, first+uint64(seeds)-1, cfg.Nodes, cfg.Partitions, cfg.Keys, cfg.Clients, cfg.TTL, cfg.Duration, cfg.Faults, max(cfg.FloorRaises, 0), max(cfg.Reshapes, 0), cfg.LivenessBound())
	if err := simulation.WriteMarkdown(&md, totals); err != nil {
		return err
	}
	runs := 0
	var virtual time.Duration
	for _, t := range totals {
		runs += t.Runs
		virtual += t.Virtual
		fmt.Fprintf(&md, "\n%s: %d process pauses between check and write, %d hung release callbacks, %d writes refused as stale",
			t.Strategy, t.Pauses, t.Hangs, t.Refused)
		if t.FloorRaises > 0 {
			fmt.Fprintf(&md, ", %d floors raised by a writer outside the fleet", t.FloorRaises)
		}
		if t.Resizes+t.Migrations > 0 {
			fmt.Fprintf(&md, ", %d resizes of the partition count and %d migrations of the ring algorithm (%d with their driver stopped mid-way, %d of them then aborted by another driver, the others resumed), nodes and an Observer compared %d times at one revision: %d disagreements",
				t.Resizes, t.Migrations, t.Interrupted, t.Aborted, t.Compared, t.Disagreements)
		}
		if t.Handovers+t.HandoversRefused > 0 {
			fmt.Fprintf(&md, ", %d claims handed over to the next owner in one transaction and %d hand-overs refused (the claims deleted instead); successors stopped in the middle of a hand-over: %d just before its transaction (%d of those hand-overs refused), %d once it committed (%d of them had served the partition already)",
				t.Handovers, t.HandoversRefused, t.KilledBefore, t.KilledBeforeRefused, t.KilledAfter, t.KilledAfterServed)
		}
		md.WriteString(".")
	}
	md.WriteString("\n")
	fmt.Fprintf(&md, "\n%d runs in %v of wall time (%.0f runs/minute), %v of virtual time.\n", runs, wall.Round(time.Millisecond),
		float64(runs)/wall.Minutes(), virtual.Round(time.Second))
	if o.corpus {
		md.WriteString("\nRegression corpus:\n\n")
		ok, err := scenario.WriteMarkdown(&md)
		if err != nil {
			return err
		}
		if !ok {
			defer fmt.Fprintln(os.Stderr, "sim: a corpus scenario failed")
		}
	}
	fmt.Print("\n" + md.String())
	if o.out != "" {
		if err := os.WriteFile(o.out, md.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if o.svg != "" {
		f, err := os.Create(o.svg)
		if err != nil {
			return err
		}
		if err := simulation.WriteSVG(f, totals); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
