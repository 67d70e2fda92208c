package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fleet is the in-process fleet: every node has its own etcd client (behind
// a fault point, so that it can be cut off as a crashed machine would be),
// its own fenced store client, a Router and an HTTP server on loopback.
type fleet struct {
	etcd  *cluster.Cluster
	store *clientv3.Client // the nodes' connection to the "database"
	cfg   Config
	app   *counters
	mu    sync.Mutex
	nodes map[string]*node
	gone  []*node // nodes that left or were killed, for the report
}

// node is one process of the fleet.
type node struct {
	id     string
	addr   string
	cli    *clientv3.Client
	fp     *cluster.FaultPoint
	node   *ownership.Node
	router *router.Router
	srv    *http.Server
	served chan struct{}

	state      string // "up", "killed", "left"
	partitions int    // partitions owned when it stopped
	stats      router.Stats
}

func (f *fleet) start(ctx context.Context, id string) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &node{id: id, addr: ln.Addr().String(), served: make(chan struct{}), state: "up"}
	fail := func(err error) (*node, error) {
		_ = ln.Close()
		if n.router != nil {
			n.router.Close()
		}
		if n.cli != nil {
			_ = n.cli.Close()
			_ = n.fp.Close()
		}
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	if n.cli, n.fp, err = f.etcd.FaultyClient(); err != nil {
		return fail(err)
	}
	cfg := ownership.DefaultConfig()
	cfg.Cluster = clusterName
	cfg.NodeID = id
	cfg.Addr = n.addr
	cfg.Ring.Partitions = f.cfg.Partitions
	cfg.Session = election.SessionConfig{TTL: f.cfg.TTL}
	cfg.DrainTimeout = 2 * time.Second
	// The store is the fencer: a new owner raises the partition's floor in
	// the store before it serves the partition, so a paused former owner
	// cannot write even to keys the new owner has not touched yet.
	cfg.Fencers = []fence.Fencer{f.app.store}
	if n.node, err = ownership.Join(ctx, n.cli, cfg); err != nil {
		return fail(err)
	}
	if n.router, err = router.New(n.node, router.Config{}); err != nil {
		_ = n.node.Close(ctx)
		return fail(err)
	}
	h, err := n.router.Handler(router.KeyFromPathValue("key"), f.app.handler(id))
	if err != nil {
		n.router.Close()
		_ = n.node.Close(ctx)
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /incr/{key}", h)
	n.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(n.served)
		_ = n.srv.Serve(ln)
	}()
	f.mu.Lock()
	f.nodes[id] = n
	f.mu.Unlock()
	return n, nil
}

// remove forgets n and returns it, or nil if it is not running.
func (f *fleet) remove(id string) *node {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[id]
	if n != nil {
		delete(f.nodes, id)
		f.gone = append(f.gone, n)
	}
	return n
}

// leave closes node id gracefully: the node hands its partitions off. Its
// HTTP server and router keep running (answering 503 or forwarding) until
// stop is called on the returned node.
func (f *fleet) leave(ctx context.Context, id string) (*node, error) {
	n := f.remove(id)
	if n == nil {
		return nil, fmt.Errorf("no node %s", id)
	}
	n.partitions = len(n.node.Owned())
	return n, n.node.Close(ctx)
}

// kill stops node id as kill -9 would: its etcd link goes dark, its server
// drops every connection with requests in flight, and it hands nothing off.
// Its claims stay until its lease expires. Requests paused in its handler
// are left running, as they would be in a process that was merely stalled.
func (f *fleet) kill(id string) {
	n := f.remove(id)
	if n == nil {
		return
	}
	n.partitions = len(n.node.Owned())
	n.fp.Blackhole()
	_ = n.srv.Close()
	<-n.served
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.node.Close(ctx) // with a dead context: no handoff, no revoke
	n.state = "killed"
	n.stats = n.router.Stats()
	n.router.Close()
	_ = n.cli.Close()
	_ = n.fp.Close()
}

// stop ends n's server (bounded: transports dial ahead, and connections that
// were never used would hold Shutdown for its whole wait), router and client
// once its node is closed.
func (n *node) stop(state string) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		_ = n.srv.Close()
	}
	<-n.served
	n.state = state
	n.stats = n.router.Stats()
	n.router.Close()
	_ = n.cli.Close()
	_ = n.fp.Close()
}

// closeAll stops every running node gracefully.
func (f *fleet) closeAll(ctx context.Context) error {
	var errs []error
	for _, id := range f.ids() {
		n, err := f.leave(ctx, id)
		if err != nil && !errors.Is(err, ownership.ErrClosed) {
			errs = append(errs, err)
		}
		if n != nil {
			n.stop("left")
		}
	}
	return errors.Join(errs...)
}

// ids returns the running nodes' IDs, sorted.
func (f *fleet) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idsLocked()
}

func (f *fleet) idsLocked() []string {
	ids := make([]string, 0, len(f.nodes))
	for id := range f.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// get returns running node id, or nil.
func (f *fleet) get(id string) *node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// newStore returns the fenced store of the counters.
func newStore(cli *clientv3.Client) (*etcdfence.Store, error) {
	cfg := etcdfence.DefaultConfig()
	cfg.Cluster = clusterName // the fleet's floors, as its nodes name it
	cfg.Prefix = "/quickstart/data/"
	return etcdfence.New(cli, cfg)
}
