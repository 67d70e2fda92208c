// Command grpccounter is a small keyed gRPC service to copy: counters
// partitioned over a fleet of copies of this binary, each served by its
// key's owner and stored with fenced writes: in etcd, or with --db in SQL
// (SQLite or PostgreSQL) as examples/counter stores them.
//
//	grpccounter --embedded-etcd /tmp/etcd --id a --listen 127.0.0.1:9081 &
//	grpccounter --id b --listen 127.0.0.1:9082 &
//	grpccounter --id c --listen 127.0.0.1:9083 &
//
// Every process joins the fleet (ownership.Join) and serves the Counter
// service (counterpb/counter.proto) on --listen through grpcroute.Server,
// whose interceptors admit a call only on its key's owner, with the
// partition's fencing token in the handler's context. Clients reach the
// owners with grpcroute.Client (see client.go's dial): its resolver
// follows the fleet in etcd, its balancer sends each call to the owner of
// the request's key, and it retries refused calls at the new owner with
// the same idempotency key.
//
// Without --db, each counter is one etcd key written with
// etcdfence.Store.CompareAndSwap under the owner's token, together with
// the idempotency keys it applied, so that a retried call is applied once
// and a former owner's late write is refused as stale (and retried by the
// client at the new owner). With --db, the counters are kept by the
// counter example's SQL store (sqlstore.go): a partition's counters in
// its owner's memory, loaded when it acquires the partition, written
// through in fenced transactions (in groups with --group-commit) that
// record each idempotency key, and, with --prepare, read ahead by a
// planned move's next owner while the holder serves.
//
// HTTP on --http: /metrics, /healthz. SIGTERM or SIGINT leaves the fleet
// gracefully (its partitions move in milliseconds, no call fails) and exits
// 0. The calls are sent in plaintext; see package grpcroute's documentation
// for mTLS.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/examples/internal/app"
	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/grpcroute"
)

// config is the command line.
type config struct {
	app.Flags
	listen     string
	http       string
	partitions int
	ttl        time.Duration

	db          string // empty: the counters in etcd
	groupCommit bool
	maxBatch    int
	prepare     bool
	warm        time.Duration
}

func main() {
	app.Main("grpccounter", parseFlags, func(c config) app.Flags { return c.Flags }, run)
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("grpccounter", flag.ContinueOnError)
	c.Register(fs, "grpccounter", "node ID, unique in the fleet", "fleet name")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:9081", "gRPC address to listen on and advertise")
	fs.StringVar(&c.http, "http", "127.0.0.1:0", "HTTP address of /metrics and /healthz")
	fs.IntVar(&c.partitions, "partitions", 0, "partition count P (0: the fleet's, or the default for a new fleet)")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "session lease TTL")
	fs.StringVar(&c.db, "db", "", "SQL store of the counters: sqlite:PATH, or PostgreSQL: postgres://... or a key=value DSN (host=... dbname=...); empty: each counter in an etcd key")
	fs.BoolVar(&c.groupCommit, "group-commit", true, "with --db: commit the increments that arrive while a commit is in flight in one transaction; false: one transaction per increment")
	fs.IntVar(&c.maxBatch, "max-batch", 256, "with --db: most increments per group commit")
	fs.BoolVar(&c.prepare, "prepare", true, "with --db, warm handoff: load a partition's counters while its previous owner still serves it (ownership OnPrepare), and catch up after the claim")
	fs.DurationVar(&c.warm, "warm-timeout", 3*time.Second, "with --db: how long a planned move waits for the next owner's preparation before it goes on cold (ownership Config.WarmTimeout; negative: no prepare phase)")
	if err := c.Parse(fs, args); err != nil {
		return config{}, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.maxBatch < 1:
		return fmt.Errorf("--max-batch %d must be at least 1", c.maxBatch)
	case c.db != "" && c.partitions != 0 && counterdb.CheckCount(c.partitions) != nil:
		return fmt.Errorf("--partitions with --db: %w", counterdb.CheckCount(c.partitions))
	}
	return nil
}

// Timeouts of the start and the graceful stop.
const (
	startTimeout = time.Minute
	leaveTimeout = 30 * time.Second
)

// run serves until ctx is done, and returns nil after a graceful leave.
func run(ctx context.Context, cfg config, log hclog.Logger) error {
	endpoints, stopEtcd, err := cfg.Endpoints(ctx, "grpccounter", log)
	if err != nil {
		return err
	}
	defer stopEtcd() // last: the others may still be leaving through it
	cli, err := app.NewClient(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	ncfg := ownership.DefaultConfig()
	var (
		reg  *prometheus.Registry
		st   store
		kind = "etcd" // the store, as the "serving gRPC" line names it
	)
	if cfg.db == "" {
		reg = app.NewRegistry()
		es, err := newEtcdStore(cli, cfg.Cluster, reg)
		if err != nil {
			return err
		}
		st = es
		ncfg.Fencers = []fence.Fencer{es.fences} // the partition's floor is raised before its first call
	} else {
		m := counterdb.NewMetrics()
		reg = m.Registry
		ss, err := openSQLStore(ctx, cfg, log, m)
		if err != nil {
			return err
		}
		defer ss.close() // after the gRPC server's stop: every call answered
		st, kind = ss, ss.dialect.String()
		ncfg.Fencers = []fence.Fencer{ss.fencer} // the partition's floor is raised before its load
		ncfg.Callbacks = ss.store.Callbacks()
		ncfg.WarmTimeout = cfg.warm
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	hln, err := net.Listen("tcp", cfg.http)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("--http: %w", err)
	}
	ncfg.Cluster, ncfg.NodeID, ncfg.Addr = cfg.Cluster, cfg.ID, ln.Addr().String()
	ncfg.Session.TTL = cfg.ttl
	ncfg.Logger = log.Named("node")
	ncfg.Metrics = reg
	if cfg.partitions != 0 {
		ncfg.Ring.Partitions = cfg.partitions
	} else {
		ncfg.AdoptSpec = true
	}
	node, err := app.Join(ctx, startTimeout, log, cli, ncfg)
	if err != nil {
		_ = ln.Close()
		_ = hln.Close()
		return err
	}
	if cfg.db != "" {
		if err := counterdb.CheckCount(node.Ring().Partitions()); err != nil {
			// A fleet created with a count the SQL store's slots do not
			// support (counterdb's slot.go).
			_ = ln.Close()
			_ = hln.Close()
			_ = node.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("the fleet's %w", err)
		}
	}
	rs, err := grpcroute.NewServer(node, grpcroute.ServerConfig{Key: requestKey, Logger: log.Named("grpcroute"), Metrics: reg})
	if err != nil {
		_ = ln.Close()
		_ = hln.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return err
	}
	srv := grpc.NewServer(rs.ServerOptions()...)
	counterpb.RegisterCounterServer(srv, &service{id: cfg.ID, store: st})
	mux := http.NewServeMux()
	app.Handle(mux, reg)
	hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	go func() { _ = hsrv.Serve(hln) }()
	defer func() {
		// The graceful stop: the node leaves the fleet (its partitions
		// hand off once the calls in flight have finished; new calls are
		// refused with the retryable answer naming the next owner), then
		// the gRPC server stops.
		lctx, cancel := app.Leave(ctx, leaveTimeout, log, node)
		defer cancel()
		srv.GracefulStop()
		<-served
		rs.Close()
		_ = hsrv.Shutdown(lctx)
	}()
	log.Info("serving gRPC", "addr", ln.Addr().String(), "partitions", node.Ring().Partitions(), "ttl", cfg.ttl, "pid", os.Getpid(), "store", kind)
	log.Info("serving HTTP", "addr", hln.Addr().String())
	return app.Wait(ctx, log, node, "gRPC", served)
}

// requestKey is the routing key of a unary call: its request's key.
// Clients route by the same function (see dial).
func requestKey(_ context.Context, _ string, req any) (string, error) {
	type keyed interface{ GetKey() string }
	if r, ok := req.(keyed); ok && r.GetKey() != "" {
		return r.GetKey(), nil
	}
	return "", grpcroute.ErrNoKey
}
