package router_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// fleet is a set of nodes of one cluster, each with a Router and a real HTTP
// server on loopback, on an embedded etcd.
type testFleet struct {
	tb      testing.TB
	etcd    *cluster.Cluster
	cli     *clientv3.Client
	name    string
	opts    fleetOptions
	mu      sync.Mutex
	members map[string]*member
}

type fleetOptions struct {
	// Partitions is P (default 16).
	Partitions int
	// Handler builds the local handler of a member (default: 200 "ok").
	Handler func(m *member) http.Handler
	// Fencers are given to every node.
	Fencers []fence.Fencer
	// Router configures every router.
	Router router.Config
	// DrainTimeout of the nodes (default 2s).
	DrainTimeout time.Duration
	// Signer signs every node's tokens (nil: unsigned).
	Signer *fence.Signer
	// Faulty gives each node its own etcd client behind a FaultPoint, so
	// that kill can cut it off from etcd.
	Faulty bool
	// Callbacks and WarmTimeout are given to every node.
	Callbacks   ownership.Callbacks
	WarmTimeout time.Duration
	// TLS, if set, is every node's server TLS configuration: the nodes
	// serve HTTPS.
	TLS *tls.Config
	// Hosts are the hosts the nodes listen on and advertise, by ID
	// (default 127.0.0.1).
	Hosts map[string]string
	// Tune, if set, changes node id's configuration before it joins.
	Tune func(id string, cfg *ownership.Config)
}

// member is one node of a fleet.
type member struct {
	id     string
	node   *ownership.Node
	router *router.Router
	srv    *http.Server
	addr   string
	served chan struct{} // closed when srv.Serve returns
	fp     *cluster.FaultPoint
}

func newFleet(tb testing.TB, etcd *cluster.Cluster, name string, opts fleetOptions) *testFleet {
	tb.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 16
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 2 * time.Second
	}
	f := &testFleet{tb: tb, etcd: etcd, cli: etcd.NewClient(tb), name: name, opts: opts, members: map[string]*member{}}
	tb.Cleanup(func() {
		f.mu.Lock()
		ms := make([]*member, 0, len(f.members))
		for _, m := range f.members {
			ms = append(ms, m)
		}
		f.mu.Unlock()
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { m.stop(tb) })
		}
		wg.Wait()
		_ = f.cli.Close()
	})
	return f
}

func (f *testFleet) nodeConfig(id, addr string) ownership.Config {
	cfg := ownership.DefaultConfig()
	cfg.Cluster = f.name
	cfg.NodeID = id
	cfg.Addr = addr
	cfg.Ring.Partitions = f.opts.Partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = f.opts.DrainTimeout
	cfg.Fencers = f.opts.Fencers
	cfg.Signer = f.opts.Signer
	cfg.Callbacks = f.opts.Callbacks
	if f.opts.WarmTimeout != 0 {
		cfg.WarmTimeout = f.opts.WarmTimeout
	}
	if f.opts.Tune != nil {
		f.opts.Tune(id, &cfg)
	}
	return cfg
}

// start joins a node with its router and HTTP server.
func (f *testFleet) start(id string) *member {
	f.tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(cmp.Or(f.opts.Hosts[id], "127.0.0.1"), "0"))
	require.NoError(f.tb, err)
	m := &member{id: id, addr: ln.Addr().String(), served: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := f.cli
	if f.opts.Faulty {
		cli, m.fp = f.etcd.NewFaultyClient(f.tb)
	}
	m.node, err = ownership.Join(ctx, cli, f.nodeConfig(id, m.addr))
	if err != nil {
		_ = ln.Close()
		require.NoError(f.tb, err)
	}
	m.router, err = router.New(m.node, f.opts.Router)
	require.NoError(f.tb, err)
	var local http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	if f.opts.Handler != nil {
		local = f.opts.Handler(m)
	}
	h, err := m.router.Handler(router.KeyFromPathValue("key"), local)
	require.NoError(f.tb, err)
	mux := http.NewServeMux()
	mux.Handle("/k/{key}/", h)
	mux.Handle("/k/{key}", h)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: f.opts.TLS.Clone()} // each server adds its protocols to its own
	go func() {
		defer close(m.served)
		if f.opts.TLS != nil {
			_ = m.srv.ServeTLS(ln, "", "")
			return
		}
		_ = m.srv.Serve(ln)
	}()
	f.mu.Lock()
	f.members[id] = m
	f.mu.Unlock()
	return m
}

// stop closes the node gracefully, then the server and the router. The
// server's Shutdown is bounded: it waits up to 5s for connections that were
// opened but never used (transports dial ahead), which the node's clean
// handoff makes pointless; whatever is left after the bound is closed.
func (m *member) stop(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.node.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
		tb.Errorf("close node %s: %v", m.id, err)
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	if err := m.srv.Shutdown(sctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.served
	m.router.Close()
}

// kill stops the member as kill -9 would: it loses etcd (if the fleet is
// Faulty), its server drops every connection, with requests in flight, and
// its node stops without handing off; its member key and claims stay until
// its lease expires.
func (m *member) kill(tb testing.TB) {
	if m.fp != nil {
		m.fp.Blackhole()
	}
	_ = m.srv.Close()
	<-m.served
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.node.Close(ctx)
	m.router.Close()
}

// remove forgets member id and returns it.
func (f *testFleet) remove(id string) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.members[id]
	delete(f.members, id)
	return m
}

// killMember kills and forgets member id.
func (f *testFleet) killMember(id string) { f.remove(id).kill(f.tb) }

// stopMember stops and forgets member id.
func (f *testFleet) stopMember(id string) { f.remove(id).stop(f.tb) }

func (f *testFleet) get(id string) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[id]
}

func (f *testFleet) list() []*member {
	f.mu.Lock()
	defer f.mu.Unlock()
	ms := make([]*member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.id, b.id) })
	return ms
}

// unstable returns why the fleet has not settled yet (fleettest.Unstable:
// every node sees the fleet's members and the ghosts as the ring, and every
// partition claimed by its ring owner, which serves it; a ghost never
// claims), and a channel that closes when the node in question sees a
// change.
func (f *testFleet) unstable(ghosts ...string) (string, <-chan struct{}) {
	ms := f.list()
	nodes := make([]*ownership.Node, len(ms))
	for i, m := range ms {
		nodes[i] = m.node
	}
	return fleettest.Unstable(nodes, ghosts...)
}

// waitStable waits until unstable reports nothing.
func (f *testFleet) waitStable(ghosts ...string) {
	f.tb.Helper()
	waitUntil(f.tb, 30*time.Second, "fleet did not settle", func() (string, <-chan struct{}) { return f.unstable(ghosts...) })
}

// waitUntil is fleettest.WaitUntil.
func waitUntil(tb testing.TB, timeout time.Duration, what string, check func() (why string, changed <-chan struct{})) {
	tb.Helper()
	fleettest.WaitUntil(tb, timeout, what, check)
}

// partitionOf returns key's partition.
func (f *testFleet) partitionOf(key string) int {
	return ring.PartitionOf(key, f.list()[0].node.Ring().Partitions())
}

// owner returns the member owning key.
func (f *testFleet) owner(key string) *member {
	for _, m := range f.list() {
		if m.node.Lookup(key).Local {
			return m
		}
	}
	return nil
}

// nonOwner returns a member not owning key.
func (f *testFleet) nonOwner(key string) *member {
	for _, m := range f.list() {
		if !m.node.Lookup(key).Local {
			return m
		}
	}
	return nil
}

// keyOwnedBy returns a key with prefix that m owns.
func keyOwnedBy(tb testing.TB, m *member, prefix string) string {
	tb.Helper()
	return fleettest.KeyOwnedBy(tb, m.node, prefix)
}

// memberValue returns the value of a member key for id at addr, as a node
// publishes it.
func memberValue(tb testing.TB, id, addr string) string {
	tb.Helper()
	v, err := keys.EncodeMember(keys.Member{ID: id, Addr: addr})
	require.NoError(tb, err)
	return v
}

// putMember writes the member key of id with value v, bound to a lease that
// lives until tb ends: a member that no node process stands behind.
func (f *testFleet) putMember(tb testing.TB, id, v string) {
	tb.Helper()
	ctx := context.Background()
	lease, err := f.cli.Grant(ctx, 60)
	require.NoError(tb, err)
	tb.Cleanup(func() { _, _ = f.cli.Revoke(context.Background(), lease.ID) })
	_, err = f.cli.Put(ctx, keys.New(f.name).Member(id), v, clientv3.WithLease(lease.ID))
	require.NoError(tb, err)
}
