package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command runs a chaos run from command-line arguments (the flags of `go
// run ./sim chaos -h`), writing the report to stdout and progress lines to
// stderr. It returns an error wrapping ErrViolation if a check failed.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule and the load")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long load runs and faults are injected")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker processes")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "client goroutines")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "counter keys")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions")
	fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "session TTL of the workers")
	fs.IntVar(&cfg.Faults, "faults", cfg.Faults, "faults, one at a time")
	fs.Float64Var(&cfg.ReadRatio, "reads", cfg.ReadRatio, "fraction of operations that read (negative: none)")
	kinds := fs.String("kinds", "", "comma-separated fault kinds: pause,kill,leader-kill,leader-freeze,blackhole (empty: all)")
	fs.StringVar(&cfg.WorkerBinary, "worker", "", "prebuilt worker command (empty: go build sim/chaos/worker)")
	verbose := fs.Bool("v", false, "pass the workers' logs and etcd's warnings on to stderr")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kinds != "" {
		for _, s := range strings.Split(*kinds, ",") {
			k, err := parseKind(strings.TrimSpace(s))
			if err != nil {
				return err
			}
			cfg.Kinds = append(cfg.Kinds, k)
		}
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *verbose {
		cfg.WorkerLogs = stderr
	}
	_, err := Run(ctx, cfg, stdout)
	return err
}

func parseKind(s string) (FaultKind, error) {
	switch s {
	case "pause":
		return Pause, nil
	case "kill":
		return Kill, nil
	case "leader-kill":
		return LeaderKill, nil
	case "leader-freeze":
		return LeaderFreeze, nil
	case "blackhole":
		return Blackhole, nil
	}
	return 0, fmt.Errorf("%w: unknown fault kind %q", ErrInvalidConfig, s)
}
