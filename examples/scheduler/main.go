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
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/election"
)

// config is the command line.
type config struct {
	id             string
	cluster        string
	job            string
	etcd           []string
	embeddedEtcd   string
	embeddedListen string
	embeddedPeer   string
	db             string
	period         time.Duration
	tenants        []string
	ttl            time.Duration
	hold           time.Duration
	listen         string
	logLevel       string
	logJSON        bool
	candidate      bool
}

func defaultID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "scheduler"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// parseFlags parses args (without the program name).
func parseFlags(args []string) (config, error) {
	var c config
	var etcd, tenants string
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.StringVar(&c.id, "id", defaultID(), "this node's ID in the election (unique per process)")
	fs.StringVar(&c.cluster, "cluster", "scheduler", "etcd key prefix /tenure/<cluster>/ of the election")
	fs.StringVar(&c.job, "job", "close-billing-period", "job name: the election's name and the job column of every record")
	fs.StringVar(&etcd, "etcd", "http://127.0.0.1:2379", "comma-separated etcd endpoints (ignored with --embedded-etcd)")
	fs.StringVar(&c.embeddedEtcd, "embedded-etcd", "", "serve a single-member etcd with its data in `DIR`, for the other copies too, and use it")
	fs.StringVar(&c.embeddedListen, "embedded-etcd-listen", "127.0.0.1:2379", "client address of the embedded etcd")
	fs.StringVar(&c.embeddedPeer, "embedded-etcd-peer", "127.0.0.1:2380", "peer address of the embedded etcd")
	fs.StringVar(&c.db, "db", "sqlite:scheduler.db", "database: sqlite:PATH or postgres://...")
	fs.DurationVar(&c.period, "period", time.Minute, "length of a billing period (whole milliseconds)")
	fs.StringVar(&tenants, "tenants", "acme,globex,initech", "comma-separated tenants")
	fs.DurationVar(&c.ttl, "ttl", election.DefaultTTL, "etcd lease TTL: how long a crashed or paused leader keeps the job (at least 2s)")
	fs.DurationVar(&c.hold, "hold", 0, "demonstration knob: wait this long between deciding which period to close and writing it, so that a pause (SIGSTOP) is likely to fall there")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "HTTP address for /metrics, /healthz and /readyz (port 0: any)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.BoolVar(&c.candidate, "candidate", true, "run for leader; false with --embedded-etcd: only serve etcd to the others (a demo's etcd host, which can then be left alone while the candidates are paused)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.etcd = splitList(etcd)
	c.tenants = splitList(tenants)
	return c, c.validate()
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c config) validate() error {
	switch {
	case c.id == "":
		return errors.New("--id must not be empty")
	case c.cluster == "":
		return errors.New("--cluster must not be empty")
	case len(c.etcd) == 0 && c.embeddedEtcd == "":
		return errors.New("--etcd or --embedded-etcd is needed")
	case c.period < time.Millisecond || c.period%time.Millisecond != 0:
		return fmt.Errorf("--period %v must be a positive whole number of milliseconds", c.period)
	case c.ttl < election.MinTTL:
		return fmt.Errorf("--ttl %v must be at least %v", c.ttl, election.MinTTL)
	case c.hold < 0:
		return fmt.Errorf("--hold %v must not be negative", c.hold)
	case len(c.tenants) == 0:
		return errors.New("--tenants must name at least one tenant")
	case hclog.LevelFromString(c.logLevel) == hclog.NoLevel:
		return fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", c.logLevel)
	}
	seen := make(map[string]bool)
	for _, t := range c.tenants {
		if seen[t] {
			return fmt.Errorf("--tenants names %q twice", t)
		}
		seen[t] = true
	}
	if err := election.ValidateName(c.job); err != nil {
		return fmt.Errorf("--job: %w", err)
	}
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(2)
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name:       "scheduler",
		Level:      hclog.LevelFromString(cfg.logLevel),
		JSONFormat: cfg.logJSON,
		Output:     os.Stderr,
	}).With("node", cfg.id)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(1)
	}
	log.Info("stopped")
}

// run runs the scheduler until ctx is done, and returns nil after a
// graceful stop.
func run(ctx context.Context, cfg config, log hclog.Logger) error {
	endpoints := cfg.etcd
	if cfg.embeddedEtcd != "" {
		e, err := startEtcd(ctx, cfg.embeddedEtcd, cfg.embeddedListen, cfg.embeddedPeer)
		if err != nil {
			return err
		}
		defer e.Close() // last: the others may still be resigning through it
		endpoints = []string{"http://" + cfg.embeddedListen}
		log.Info("serving embedded etcd", "endpoint", endpoints[0], "dir", cfg.embeddedEtcd)
	}

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

	cli, err := newClient(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	c := &candidate{
		cli: cli, cluster: cfg.cluster, id: cfg.id, addr: ln.Addr().String(), ttl: cfg.ttl,
		fencer: ledger.fencer(), status: st, log: log, metrics: m,
		job: &job{
			ledger: ledger, node: cfg.id, tenants: cfg.tenants, period: cfg.period, hold: cfg.hold,
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
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		err := l.createSchema(ctx)
		if err == nil {
			return nil
		}
		log.Debug("create schema; retrying", "error", err, "in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		delay = min(2*delay, time.Second)
	}
}
