// Command quickstart shows tenure end to end, on an embedded etcd, with no
// set-up:
//
//	go run ./examples/quickstart
//
// It starts a 3-member etcd cluster on loopback and a fleet of nodes in this
// process, each serving HTTP on loopback. Every node runs the same tiny
// application: POST /incr/{key} adds one to a per-key counter kept in a
// fenced store in etcd (package fence/etcdfence), under the fencing token of
// the key's partition. A router.Client outside the fleet sends a few thousand
// increments, each straight to its key's owner; some go through a random
// node instead, which forwards them one hop.
//
// While the load runs, one node is killed abruptly (its requests in flight
// are paused, as a stalled process would be, and resume after its partitions
// have failed over), one node joins, and one leaves gracefully. At the end
// the program prints a table per node, the handoffs and the failover with
// their durations, how many stale writes the store rejected, and checks that
// every counter equals its acknowledged increments. The exit status is 0
// only if the check passes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tenure-go/tenure/examples/internal/app"
)

const clusterName = "quickstart"

// Config sizes a run.
type Config struct {
	// Nodes is the initial fleet size (at least 3: one is killed and one
	// leaves).
	Nodes int
	// Partitions is the partition count of the ring.
	Partitions int
	// Keys is the number of counters.
	Keys int
	// Increments is how many increments are acknowledged before the run
	// stops (the load also runs until every event is over).
	Increments int
	// Workers is the number of concurrent callers.
	Workers int
	// Rate caps the increments sent per second, so that the events happen
	// under load; 0 means no cap.
	Rate int
	// TTL is the nodes' lease TTL: the failover time after a crash.
	TTL time.Duration
	// Paused is how many requests of the killed node are paused across its
	// failover.
	Paused int
	// Progress, if set, receives a progress line while the load runs.
	Progress io.Writer
}

// DefaultConfig is the run of go run ./examples/quickstart.
func DefaultConfig() Config {
	return Config{
		Nodes:      4,
		Partitions: 128,
		Keys:       256,
		Increments: 4000,
		Workers:    16,
		Rate:       500,
		TTL:        2 * time.Second,
		Paused:     3,
	}
}

// Validate reports a Config that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 3:
		return fmt.Errorf("nodes %d: need at least 3", c.Nodes)
	case c.Partitions <= 0:
		return fmt.Errorf("partitions %d: must be positive", c.Partitions)
	case c.Keys <= 0 || c.Workers <= 0 || c.Increments <= 0:
		return fmt.Errorf("keys %d, workers %d, increments %d: must be positive", c.Keys, c.Workers, c.Increments)
	case c.Rate < 0 || c.Paused < 0:
		return fmt.Errorf("rate %d, paused %d: must not be negative", c.Rate, c.Paused)
	case c.TTL < 2*time.Second:
		return fmt.Errorf("ttl %v: etcd's minimum is 2s", c.TTL)
	}
	return nil
}

// parseFlags parses args (without the program name) into a Config.
func parseFlags(args []string) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "initial number of nodes (>= 3)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "number of partitions")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "number of counters")
	fs.IntVar(&cfg.Increments, "increments", cfg.Increments, "acknowledged increments to reach")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent callers")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "most increments sent per second (0: no cap)")
	fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "lease TTL of the nodes")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

func main() {
	cfg := app.ParseArgs("quickstart", parseFlags)
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Progress = os.Stdout
	}
	ctx, stop := app.SignalContext()
	defer stop()
	rep, err := Run(ctx, cfg, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		stop()
		os.Exit(2)
	case !rep.OK():
		stop()
		os.Exit(1)
	}
}

// Run runs the demonstration and writes its report to out. It returns an
// error if the run could not be carried out; the verdict of a run that was is
// in the Report.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &demo{cfg: cfg, out: out, start: time.Now()}
	defer d.close()
	if err := d.setUp(ctx); err != nil {
		return nil, err
	}
	if err := d.runLoad(ctx); err != nil {
		return nil, err
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	d.gather()
	d.rep.Print(out)
	if err := d.fleet.closeAll(ctx); err != nil {
		return nil, fmt.Errorf("close the fleet: %w", err)
	}
	fmt.Fprintf(out, "\nverdict: %s (%v)\n", verdict(d.rep.OK()), time.Since(d.start).Round(10*time.Millisecond))
	return &d.rep, nil
}

func verdict(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAILED"
}

// errStopped reports a run cut short by its context.
var errStopped = errors.New("stopped")
