package scale

import (
	"context"
	"flag"
	"io"

	"github.com/tenure-go/tenure/ownership/ring"
)

// Command runs the scale measurement from command-line arguments (the
// flags of `go run ./sim scale -h`), writing the tables to stdout and
// progress lines to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "live fleet size")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the live fleet")
	fs.IntVar(&cfg.Restarts, "restarts", 0, "nodes restarted by the rolling restart (0: all)")
	fs.IntVar(&cfg.RingNodes, "ring-nodes", cfg.RingNodes, "nodes of the ring-only figures")
	fs.IntVar(&cfg.RingPartitions, "ring-partitions", cfg.RingPartitions, "partitions of the ring-only figures")
	fs.IntVar(&cfg.RingSamples, "ring-samples", cfg.RingSamples, "joins and leaves sampled for the ring-only figures")
	fs.BoolVar(&cfg.RingOnly, "ring-only", false, "compute the ring-only figures only")
	fs.BoolVar(&cfg.SkipRing, "skip-ring", false, "skip the ring-only figures")
	fs.DurationVar(&cfg.LoadReports, "load-reports", 0, "live fleet: a last phase of this much virtual time with load, counting the load reports' writes (0: none)")
	fs.BoolVar(&cfg.Placement, "placement", false, "compute the placement figures (load reports, balance pass) at -nodes x -partitions")
	fs.StringVar(&cfg.LoadModel, "load-model", LoadZipf, "load of the placement figures: zipf (keys), tenants (5,000, log-uniform 1-1,000) or uniform (0.5-1.5 per partition)")
	fs.IntVar(&cfg.LoadKeys, "load-keys", cfg.LoadKeys, "keys of the zipf load model")
	fs.Float64Var(&cfg.LoadFactor, "load", cfg.LoadFactor, "load factor")
	fs.TextVar(&cfg.RingAlgorithm, "ring-algorithm", ring.Algorithm(0), "ring algorithm of the live fleet: weighted (default, a new fleet's) or bounded (count-only)")
	fs.BoolVar(&cfg.RingBoth, "ring-both", true, "ring-only figures of both ring algorithms, side by side")
	fs.IntVar(&cfg.RingHeavy, "ring-heavy", 0, "every k-th node (and joiner) of the ring-only and placement figures has weight 2 (0: none)")
	fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "session TTL")
	fs.DurationVar(&cfg.Step, "step", cfg.Step, "virtual clock step")
	fs.DurationVar(&cfg.Quiet, "quiet", cfg.Quiet, "wall time without activity before the clock advances")
	fs.DurationVar(&cfg.WaitTimeout, "wait", cfg.WaitTimeout, "wall-time bound of each wait for a stable ring")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	_, err := Run(ctx, cfg, stdout)
	return err
}
