// Command upgradenode is one node of a fleet for router's tests of mixed
// builds: it joins the fleet, serves /k/{key} through a router.Handler
// (the work holds the key's partition for a millisecond and answers "ok"
// with the token it ran under), writes "addr <host:port>" on standard
// output once it listens, logs as JSON lines on standard error, and
// leaves the fleet gracefully on SIGTERM. Built with the tag
// featurelevel_prev it is a build of the previous feature level
// (internal/fleetview's featurelevel_prev.go).
//
// Usage:
//
//	upgradenode -endpoints E1,E2 -cluster NAME -id ID -partitions P
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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
)

func main() { os.Exit(run()) }

func run() int {
	endpoints := flag.String("endpoints", "", "etcd endpoints, comma-separated")
	cluster := flag.String("cluster", "", "the fleet's name")
	id := flag.String("id", "", "this node's ID")
	partitions := flag.Int("partitions", 0, "the fleet's partition count")
	flag.Parse()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: os.Stderr, JSONFormat: true})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		log.Error("etcd client", "error", err)
		return 2
	}
	defer cli.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Error("listen", "error", err)
		return 1
	}
	defer ln.Close()
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = *cluster, *id, ln.Addr().String()
	cfg.Ring.Partitions = *partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.Logger = log
	jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	n, err := ownership.Join(jctx, cli, cfg)
	cancel()
	if err != nil {
		log.Error("join", "error", err)
		return 1
	}
	r, err := router.New(n, router.DefaultConfig())
	if err != nil {
		log.Error("router", "error", err)
		return 1
	}
	defer r.Close()
	h, err := r.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(work))
	if err != nil {
		log.Error("handler", "error", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/k/{key}", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("addr %s\n", ln.Addr())
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := 0
	if err := n.Close(cctx); err != nil {
		log.Error("close", "error", err)
		code = 1
	}
	sctx, scancel := context.WithTimeout(cctx, time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "error", err)
		code = 1
	}
	return code
}

// work holds the key's partition for a millisecond, in flight while a
// handoff drains it, and answers with the token it ran under.
func work(w http.ResponseWriter, r *http.Request) {
	tok, ok := fence.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fencing token", http.StatusInternalServerError)
		return
	}
	select {
	case <-time.After(time.Millisecond):
	case <-r.Context().Done():
		if !router.WriteError(w, r, context.Cause(r.Context())) {
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		}
		return
	}
	fmt.Fprintf(w, "ok %s", tok)
}
