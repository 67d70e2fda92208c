package placement

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Command runs the placement simulation from command-line arguments (the
// flags of `go run ./sim placement -h`), writing the tables to stdout and,
// with -out, to a file.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("placement", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fleets := fs.String("nodes", "10,50", "comma-separated fleet sizes")
	workloads := fs.String("workloads", "keys,tenants", "comma-separated workloads: keys (Zipf), tenants (log-uniform)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "keys of the Zipf workload")
	fs.Float64Var(&cfg.ZipfS, "s", cfg.ZipfS, "Zipf exponent")
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "tenants of the tenants workload")
	fs.Float64Var(&cfg.Noise, "noise", cfg.Noise, "multiplicative noise per partition and tick")
	fs.Float64Var(&cfg.Hot, "hot", cfg.Hot, "hot tenant's rate over the mean load per weight")
	fs.Float64Var(&cfg.Balance.Upper, "upper", cfg.Balance.Upper, "balancer's upper band")
	fs.Float64Var(&cfg.Balance.Lower, "lower", cfg.Balance.Lower, "balancer's lower band")
	fs.Float64Var(&cfg.Balance.NoiseMargin, "noise-margin", cfg.Balance.NoiseMargin, "balancer's noise margin (negative: none)")
	fs.Float64Var(&cfg.Balance.Budget, "budget", cfg.Balance.Budget, "balancer's budget per pass (fraction of the partitions)")
	fs.DurationVar(&cfg.Balance.Cooldown, "cooldown", cfg.Balance.Cooldown, "balancer's cooldown")
	fs.DurationVar(&cfg.Balance.Interval, "interval", cfg.Balance.Interval, "balancer's interval")
	fs.DurationVar(&cfg.Steady, "steady", cfg.Steady, "virtual time under stationary load")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed")
	out := fs.String("out", "", "also write the markdown report to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Fleets = nil
	for _, s := range strings.Split(*fleets, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%w: -nodes %q", ErrInvalidConfig, *fleets)
		}
		cfg.Fleets = append(cfg.Fleets, n)
	}
	cfg.Workloads = nil
	for _, s := range strings.Split(*workloads, ",") {
		cfg.Workloads = append(cfg.Workloads, Workload(strings.TrimSpace(s)))
	}
	rows, err := Run(ctx, cfg, func(r Row) { fmt.Fprintf(stderr, "%s\n", r.Summary()) })
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, cfg, rows, "go run ./sim placement "+strings.Join(args, " ")); err != nil {
		return err
	}
	if _, err := stdout.Write(md.Bytes()); err != nil {
		return err
	}
	if *out != "" {
		return os.WriteFile(*out, md.Bytes(), 0o644)
	}
	return nil
}
