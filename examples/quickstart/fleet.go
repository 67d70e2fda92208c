package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fleet is the in-process fleet: every node has its own etcd client (behind
// a fault point, so that it can be cut off as a crashed machine would be),
// a Router and an HTTP server on loopback. The nodes share the application
// and its fenced store, whose etcd client stands for their database
// connection.
type fleet struct {
	etcd  *cluster.Cluster
	ttl   time.Duration // the nodes' lease TTL
	ring  ring.Config   // the nodes' ring: ring.DefaultConfig with Config.Partitions
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

func (f *fleet) start(ctx context.Context, id string) (_ *node, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &node{id: id, addr: ln.Addr().String(), served: make(chan struct{}), state: "up"}
	defer func() {
		if err == nil {
			return
		}
		if n.router != nil {
			n.router.Close()
		}
		if n.node != nil {
			_ = n.node.Close(ctx)
		}
		if n.cli != nil {
			_ = n.cli.Close()
			_ = n.fp.Close()
		}
		_ = ln.Close()
		err = fmt.Errorf("start %s: %w", id, err)
	}()
	if n.cli, n.fp, err = f.etcd.FaultyClient(); err != nil {
		return nil, err
	}
	cfg := ownership.DefaultConfig()
	cfg.Cluster = clusterName
	cfg.NodeID = id
	cfg.Addr = n.addr
	cfg.Ring = f.ring
	cfg.Session.TTL = f.ttl
	cfg.DrainTimeout = 2 * time.Second
	// The store is the fencer: a new owner raises the partition's floor in
	// the store before it serves the partition, so a paused former owner
	// cannot write even to keys the new owner has not touched yet.
	cfg.Fencers = []fence.Fencer{f.app.store}
	if n.node, err = ownership.Join(ctx, n.cli, cfg); err != nil {
		return nil, err
	}
	if n.router, err = router.New(n.node, router.Config{}); err != nil {
		return nil, err
	}
	h, err := n.router.Handler(router.KeyFromPathValue("key"), f.app.handler(id))
	if err != nil {
		return nil, err
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
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.node.Close(ctx) // with a dead context: no handoff, no revoke
	n.stop("killed")
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
	return slices.Sorted(maps.Keys(f.nodes))
}

// get returns running node id, or nil.
func (f *fleet) get(id string) *node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// dataPrefix is where the store keeps the counters in etcd.
const dataPrefix = "/quickstart/data/"

// newStore returns the fenced store of the counters.
func newStore(cli *clientv3.Client) (*etcdfence.Store, error) {
	cfg := etcdfence.DefaultConfig()
	cfg.Cluster = clusterName // the fleet's floors, as its nodes name it
	cfg.Prefix = dataPrefix
	return etcdfence.New(cli, cfg)
}
