// Command grpccounter is a small keyed gRPC service to copy: counters
// partitioned over a fleet of copies of this binary, each served by its
// key's owner and stored in etcd with fenced writes.
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
// the same idempotency key. Each counter is one etcd key written with
// etcdfence.Store.CompareAndSwap under the owner's token, together with
// the idempotency keys it applied, so that a retried call is applied once
// and a former owner's late write is refused as stale (and retried by the
// client at the new owner).
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
	"google.golang.org/grpc"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/examples/internal/app"
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
	return c, c.Parse(fs, args)
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
	reg := app.NewRegistry()
	store, err := newStore(cli, cfg.Cluster, reg)
	if err != nil {
		return err
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
	ncfg := ownership.DefaultConfig()
	ncfg.Cluster, ncfg.NodeID, ncfg.Addr = cfg.Cluster, cfg.ID, ln.Addr().String()
	ncfg.Session.TTL = cfg.ttl
	ncfg.Logger = log.Named("node")
	ncfg.Fencers = []fence.Fencer{store.fences} // the partition's floor is raised before its first call
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
	rs, err := grpcroute.NewServer(node, grpcroute.ServerConfig{Key: requestKey, Logger: log.Named("grpcroute"), Metrics: reg})
	if err != nil {
		_ = ln.Close()
		_ = hln.Close()
		_ = node.Close(context.WithoutCancel(ctx))
		return err
	}
	srv := grpc.NewServer(rs.ServerOptions()...)
	counterpb.RegisterCounterServer(srv, &service{id: cfg.ID, store: store})
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
	log.Info("serving gRPC", "addr", ln.Addr().String(), "partitions", node.Ring().Partitions(), "ttl", cfg.ttl, "pid", os.Getpid())
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
