// Command scheduler runs a job that must run on exactly one node: every
// period, the leader of an etcd election closes the billing period that
// just ended, for each tenant. Run as many copies as you like; one leads,
// the others wait to take over.
//
//	scheduler --embedded-etcd /tmp/etcd --id a --listen 127.0.0.1:8081 &
//	scheduler --id b --listen 127.0.0.1:8082 &
//	scheduler --id c --listen 127.0.0.1:8083 &
//
// Each close is recorded in SQL (SQLite or PostgreSQL) by a fenced write
// keyed by (job, tenant, period), in a transaction that first checks the
// leader's fencing token against the job's floor (fence/sqlfence). The
// election raises the floor to every new leader's epoch before the leader
// reads anything, so a former leader that was paused (SIGSTOP, a GC pause,
// a migrated VM) for longer than its lease and then wakes up to finish a
// write is refused by the database: a period is closed exactly once, and a
// new leader first catches up on the periods its predecessor did not
// close.
//
// HTTP on --listen: /metrics (Prometheus), /healthz, /readyz. SIGTERM or
// SIGINT resigns the leadership (the next leader takes over within
// milliseconds), revokes the lease and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/examples/internal/app"
)

// config is the command line.
type config struct {
	app.Flags
	job       string
	db        string
	period    time.Duration
	tenants   []string
	ttl       time.Duration
	hold      time.Duration
	listen    string
	candidate bool
}

// parseFlags parses args (without the program name).
func parseFlags(args []string) (config, error) {
	var c config
	var tenants string
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	c.Register(fs, "scheduler", "this node's ID in the election (unique per process)", "etcd key prefix /tenure/<cluster>/ of the election")
	fs.StringVar(&c.job, "job", "close-billing-period", "job name: the election's name and the job column of every record")
	fs.StringVar(&c.db, "db", "sqlite:scheduler.db", "database: sqlite:PATH or postgres://...")
	fs.DurationVar(&c.period, "period", time.Minute, "length of a billing period (whole milliseconds)")
	fs.StringVar(&tenants, "tenants", "acme,globex,initech", "comma-separated tenants")
	fs.DurationVar(&c.ttl, "ttl", election.DefaultTTL, "etcd lease TTL: how long a crashed or paused leader keeps the job (at least 2s)")
	fs.DurationVar(&c.hold, "hold", 0, "demonstration knob: wait this long between deciding which period to close and writing it, so that a pause (SIGSTOP) is likely to fall there")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "HTTP address for /metrics, /healthz and /readyz (port 0: any)")
	fs.BoolVar(&c.candidate, "candidate", true, "run for leader; false with --embedded-etcd: only serve etcd to the others (a demo's etcd host, which can then be left alone while the candidates are paused)")
	if err := c.Parse(fs, args); err != nil {
		return config{}, err
	}
	c.tenants = app.SplitList(tenants)
	return c, c.validate()
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string { return app.SplitList(s) }

func (c config) validate() error {
	switch {
	case c.ID == "":
		return errors.New("--id must not be empty")
	case c.Cluster == "":
		return errors.New("--cluster must not be empty")
	case c.period < time.Millisecond || c.period%time.Millisecond != 0:
		return fmt.Errorf("--period %v must be a positive whole number of milliseconds", c.period)
	case c.ttl < election.MinTTL:
		return fmt.Errorf("--ttl %v must be at least %v", c.ttl, election.MinTTL)
	case c.hold < 0:
		return fmt.Errorf("--hold %v must not be negative", c.hold)
	case len(c.tenants) == 0:
		return errors.New("--tenants must name at least one tenant")
	}
	seen := make(map[string]bool)
	for _, t := range c.tenants {
		if seen[t] {
			return fmt.Errorf("--tenants names %q twice", t)
		}
		seen[t] = true
	}
	if err := (election.ElectionConfig{Cluster: c.Cluster, Name: c.job}).Validate(); err != nil {
		return fmt.Errorf("--job %q (election name), --cluster %q: %w", c.job, c.Cluster, err)
	}
	return nil
}

func main() {
	app.Main("scheduler", parseFlags, func(c config) app.Flags { return c.Flags }, run)
}

// run runs the scheduler until ctx is done, and returns nil after a
// graceful stop.
func run(ctx context.Context, cfg config, log hclog.Logger) error {
	endpoints, stopEtcd, err := cfg.Endpoints(ctx, "scheduler", log)
	if err != nil {
		return err
	}
	defer stopEtcd() // last: the others may still be resigning through it

	m := newMetrics()
	st := &status{}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	srv := &http.Server{Handler: handler(m, st), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	if !cfg.candidate {
		st.set(true, "not a candidate")
		log.Info("serving HTTP; not a candidate (--candidate=false)", "addr", ln.Addr().String(), "pid", os.Getpid())
		<-ctx.Done()
		return nil
	}

	db, dialect, err := openDB(cfg.db, cfg.ttl)
	if err != nil {
		return err
	}
	defer db.Close()
	ledger, err := newLedger(db, dialect, cfg.job)
	if err != nil {
		return err
	}
	if err := createSchema(ctx, ledger, log); err != nil {
		return err
	}
	log.Info("serving HTTP", "addr", ln.Addr().String(), "pid", os.Getpid(), "db", dialect.String(),
		"period", cfg.period, "tenants", strings.Join(cfg.tenants, ","), "ttl", cfg.ttl)

	cli, err := app.NewClient(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	c := &candidate{
		cli: cli, cluster: cfg.Cluster, id: cfg.ID, addr: ln.Addr().String(), ttl: cfg.ttl,
		fencer: ledger.fencer(), status: st, log: log, metrics: m,
		job: &job{
			ledger: ledger, node: cfg.ID, tenants: cfg.tenants, period: cfg.period, hold: cfg.hold,
			shutdown: ctx, log: log.Named("job"), metrics: m,
		},
	}
	return c.run(ctx)
}

// schemaTimeout bounds the attempts to create the schema at start.
const schemaTimeout = 30 * time.Second

// createSchema creates the tables, retrying while the database is busy or
// not up yet: copies that start together race for SQLite's file lock (the
// switch to WAL mode does not wait for it).
func createSchema(ctx context.Context, l *ledger, log hclog.Logger) error {
	return app.Retry(ctx, schemaTimeout, log, "create schema", l.createSchema)
}
