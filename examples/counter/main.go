// Command counter is a keyed service to copy into production: counters
// partitioned over a fleet of copies of this binary, each counter kept in
// the memory of its one owner and written through to SQL (SQLite or
// PostgreSQL) with fenced writes.
//
//	counter --embedded-etcd /tmp/etcd --id a --listen 127.0.0.1:8081 &
//	counter --id b --listen 127.0.0.1:8082 &
//	counter --id c --listen 127.0.0.1:8083 &
//	curl -X POST -H 'Idempotency-Key: 1' 127.0.0.1:8082/counters/apples/incr
//
// Every process joins the fleet (ownership.Join); the ring gives each
// partition of the key space to one of them. A request for a key owned
// elsewhere is forwarded one hop (router.Handler). The owner loads a
// partition's counters when it acquires the partition, after the
// partition's floor in the database was raised to its epoch, and drops
// them when it releases it. Increments are committed in groups: one
// transaction takes every increment that arrived while the previous one was
// in flight, checks each partition's token once and records each
// idempotency key, so that a retried increment returns its stored result
// instead of counting twice, and a former owner (paused past its lease) is
// refused by the database.
//
// HTTP on --listen: POST /counters/{key}/incr (with an Idempotency-Key
// header), GET /counters/{key}, /metrics, /healthz, /readyz. SIGTERM or
// SIGINT leaves the fleet gracefully (its partitions move in milliseconds,
// no request fails) and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/examples/internal/app"
	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
)

// config is the command line.
type config struct {
	app.Flags
	db          string
	partitions  int
	ttl         time.Duration
	groupCommit bool
	maxBatch    int
	hold        time.Duration
	listen      string
	advertise   string
	prepare     bool
	warm        time.Duration
	traceFile   string
}

// parseFlags parses args (without the program name).
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("counter", flag.ContinueOnError)
	c.Register(fs, "counter", "this node's ID in the fleet (unique per live process)", "fleet name: etcd key prefix /tenure/<cluster>/")
	fs.StringVar(&c.db, "db", "sqlite:counter.db", "database: sqlite:PATH, or PostgreSQL: postgres://... or a key=value DSN (host=... dbname=...)")
	fs.IntVar(&c.partitions, "partitions", 0, "partition count of the fleet, a power of two (counterdb's slot.go), refused if the fleet's spec says otherwise (0: the fleet's count, or 1024 if this node creates the fleet; decided atomically with the spec's creation)")
	fs.DurationVar(&c.ttl, "ttl", election.DefaultTTL, "etcd lease TTL: how long a crashed or paused process keeps its partitions (at least 2s)")
	fs.BoolVar(&c.groupCommit, "group-commit", true, "commit the increments that arrive while a commit is in flight in one transaction; false: one transaction per increment")
	fs.IntVar(&c.maxBatch, "max-batch", 256, "most increments per group commit")
	fs.DurationVar(&c.hold, "hold", 0, "demonstration knob: one increment at a time, after it was admitted, waits this long before its commit, with no transaction of the process in flight, so that a pause (SIGSTOP) is likely to fall there and hold no database lock")
	fs.BoolVar(&c.prepare, "prepare", true, "warm handoff: load a partition's counters while its previous owner still serves it (ownership OnPrepare), and catch up after the claim")
	fs.DurationVar(&c.warm, "warm-timeout", 3*time.Second, "how long a planned move waits for the next owner's preparation before it goes on cold (ownership Config.WarmTimeout; negative: no prepare phase)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "HTTP address (port 0: any)")
	fs.StringVar(&c.traceFile, "trace-file", "", "append every finished OpenTelemetry span of the node and the router (a planned move's phases, each request served) to `PATH` as one JSON line (spans.go); empty: no spans")
	fs.StringVar(&c.advertise, "advertise", "", "address the other nodes reach this one at (default: the listening address)")
	if err := c.Parse(fs, args); err != nil {
		return config{}, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.Cluster == "" || strings.ContainsAny(c.Cluster, "/\x00"):
		return fmt.Errorf("--cluster %q must be non-empty, without '/'", c.Cluster)
	case c.partitions < 0 || c.partitions > ring.MaxPartitions:
		return fmt.Errorf("--partitions %d must be in [0, %d]", c.partitions, ring.MaxPartitions)
	case c.partitions != 0 && counterdb.CheckCount(c.partitions) != nil:
		return fmt.Errorf("--partitions: %w", counterdb.CheckCount(c.partitions))
	case c.ttl < election.MinTTL:
		return fmt.Errorf("--ttl %v must be at least %v", c.ttl, election.MinTTL)
	case c.maxBatch < 1:
		return fmt.Errorf("--max-batch %d must be at least 1", c.maxBatch)
	case c.hold < 0:
		return fmt.Errorf("--hold %v must not be negative", c.hold)
	}
	if err := ring.ValidateNodeID(c.ID); err != nil {
		return fmt.Errorf("--id: %w", err)
	}
	return nil
}

func main() {
	app.Main("counter", parseFlags, func(c config) app.Flags { return c.Flags }, run)
}

// Timeouts of the start and the graceful stop.
const (
	startTimeout  = time.Minute
	schemaTimeout = 30 * time.Second
	leaveTimeout  = 30 * time.Second
)

// run serves until ctx is done, and returns nil after a graceful leave.
func run(ctx context.Context, cfg config, log hclog.Logger) error {
	endpoints, stopEtcd, err := cfg.Endpoints(ctx, "counter", log)
	if err != nil {
		return err
	}
	defer stopEtcd() // last: the others may still be leaving through it

	m := counterdb.NewMetrics()
	db, dialect, err := counterdb.Open(cfg.db, cfg.ttl)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := m.WatchPool(db); err != nil {
		return err
	}
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect, Metrics: m.Registry})
	if err != nil {
		return err
	}
	if err := app.Retry(ctx, schemaTimeout, log, "create schema", func(ctx context.Context) error {
		return counterdb.CreateSchema(ctx, db, dialect, fences)
	}); err != nil {
		return err
	}
	if err := counterdb.WarmPool(ctx, db, dialect); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	addr := cfg.advertise
	if addr == "" {
		addr = ln.Addr().String()
	}

	cli, err := app.NewClient(endpoints)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer cli.Close()

	var tp *sdktrace.TracerProvider
	if cfg.traceFile != "" {
		var shutdown func(context.Context) error
		if tp, shutdown, err = openTrace(cfg.traceFile); err != nil {
			_ = ln.Close()
			return err
		}
		defer func() { // after the leave below: its spans are written too
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				log.Warn("write the spans", "file", cfg.traceFile, "error", err)
			}
		}()
	}

	st := counterdb.NewStore(db, dialect, fences, log.Named("store"), m, cfg.prepare)
	ncfg := ownership.DefaultConfig()
	ncfg.Cluster = cfg.Cluster
	ncfg.NodeID = cfg.ID
	ncfg.Addr = addr
	ncfg.Session.TTL = cfg.ttl
	ncfg.Logger = log.Named("node")
	ncfg.Callbacks = st.Callbacks()
	ncfg.WarmTimeout = cfg.warm
	ncfg.Fencers = []fence.Fencer{sqlfence.Fencer{DB: db, Fences: fences}}
	ncfg.Metrics = m.Registry // tenure_partition_*, tenure_session_*, ... labelled node=<id>
	rcfg := router.Config{Logger: log.Named("router"), Metrics: m.Registry}
	if tp != nil {
		ncfg.TracerProvider, rcfg.TracerProvider = tp, tp
	}
	if cfg.partitions != 0 {
		ncfg.Ring.Partitions = cfg.partitions // the fleet's spec must say the same
	} else {
		ncfg.AdoptSpec = true // the fleet's spec, or ring.DefaultConfig's if there is none yet
	}
	node, err := app.Join(ctx, startTimeout, log, cli, ncfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if err := counterdb.CheckCount(node.Ring().Partitions()); err != nil {
		// A fleet created by another program with a count the slots do
		// not support (counterdb's slot.go).
		_ = ln.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("the fleet's %w", err)
	}
	rt, err := router.New(node, rcfg)
	if err != nil {
		_ = ln.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return err
	}
	com, err := counterdb.NewCommitter(st, cfg.ID, cfg.groupCommit, cfg.maxBatch, cfg.hold, log.Named("commit"))
	if err != nil {
		_ = ln.Close()
		rt.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return err
	}
	h, err := handler(rt, node, &service{node: cfg.ID, store: st, com: com}, m)
	if err != nil {
		_ = ln.Close()
		rt.Close()
		com.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		// The graceful stop, in this order: the node leaves the fleet
		// (every partition hands off: new requests for it are forwarded
		// to the next owner or refused with the retryable answer, those in
		// flight finish and commit), then the server stops listening, and
		// the committer ends once the last request has been answered.
		lctx, cancel := app.Leave(ctx, leaveTimeout, log, node)
		defer cancel()
		_ = srv.Shutdown(lctx)
		<-served
		rt.Close()
		com.Close()
	}()
	// The node's own "joined" line says how many partitions the fleet has.
	log.Info("serving HTTP", "addr", ln.Addr().String(), "advertise", addr, "pid", os.Getpid(), "db", dialect,
		"ttl", cfg.ttl, "group_commit", cfg.groupCommit)
	return app.Wait(ctx, log, node, "HTTP", served)
}
