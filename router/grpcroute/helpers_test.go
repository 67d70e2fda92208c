package grpcroute_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// testFleet is a set of nodes of one cluster, each with a grpcroute.Server
// and a real gRPC server on loopback serving counters from one shared
// store, on an embedded etcd.
type testFleet struct {
	tb         testing.TB
	etcd       *cluster.Cluster
	cli        *clientv3.Client
	name       string
	partitions int
	faulty     bool
	store      *store
	metrics    *prometheus.Registry // of every node's Server; nil: none
	logger     hclog.Logger         // of every node's Server, with its node's ID; nil: none
	serverKey  grpcroute.KeyFunc    // of every node's Server
	serverOpts []grpc.ServerOption  // of every node's gRPC server, after the Server's
	hosts      map[string]string    // the host a node listens on and advertises, by ID; default 127.0.0.1
	tracing    trace.TracerProvider // of every node's Server; nil: none
	mu         sync.Mutex
	members    map[string]*member
}

// member is one node of a testFleet.
type member struct {
	id     string
	addr   string
	node   *ownership.Node
	rs     *grpcroute.Server
	srv    *grpc.Server
	served chan struct{}
	fp     *cluster.FaultPoint
}

func newFleet(tb testing.TB, etcd *cluster.Cluster, name string, faulty bool) *testFleet {
	f := &testFleet{tb: tb, etcd: etcd, cli: etcd.NewClient(tb), name: name, partitions: 16, faulty: faulty,
		store: newStore(), members: map[string]*member{}}
	tb.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range f.list() {
			wg.Go(func() { m.stop(tb) })
		}
		wg.Wait()
	})
	return f
}

// start joins node id with its Server and gRPC server.
func (f *testFleet) start(id string) *member {
	f.tb.Helper()
	host := cmp.Or(f.hosts[id], "127.0.0.1")
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(f.tb, err)
	m := &member{id: id, addr: ln.Addr().String(), served: make(chan struct{})}
	cli := f.cli
	if f.faulty {
		cli, m.fp = f.etcd.NewFaultyClient(f.tb)
	}
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = f.name, id, m.addr
	cfg.Ring.Partitions = f.partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	cfg.Fencers = []fence.Fencer{&f.store.gate}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.node, err = ownership.Join(ctx, cli, cfg)
	if err != nil {
		_ = ln.Close()
		require.NoError(f.tb, err)
	}
	var reg prometheus.Registerer
	if f.metrics != nil {
		reg = f.metrics
	}
	var log hclog.Logger
	if f.logger != nil {
		log = f.logger.With("node", id)
	}
	m.rs, err = grpcroute.NewServer(m.node, grpcroute.ServerConfig{Metrics: reg, Logger: log, Key: f.serverKey, TracerProvider: f.tracing})
	require.NoError(f.tb, err)
	m.srv = grpc.NewServer(append(m.rs.ServerOptions(), f.serverOpts...)...)
	counterpb.RegisterCounterServer(m.srv, &counterService{id: id, store: f.store})
	go func() {
		defer close(m.served)
		_ = m.srv.Serve(ln)
	}()
	f.mu.Lock()
	f.members[id] = m
	f.mu.Unlock()
	return m
}

// startStable starts nodes ids and waits until the fleet has settled.
func (f *testFleet) startStable(ids ...string) {
	f.tb.Helper()
	for _, id := range ids {
		f.start(id)
	}
	f.waitStable()
}

// stop closes the node gracefully (its partitions hand off, its calls in
// flight drain), then the gRPC server.
func (m *member) stop(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.node.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
		tb.Errorf("close node %s: %v", m.id, err)
	}
	m.srv.GracefulStop()
	<-m.served
	m.rs.Close()
}

// stopMember stops and forgets member id.
func (f *testFleet) stopMember(id string) {
	f.mu.Lock()
	m := f.members[id]
	delete(f.members, id)
	f.mu.Unlock()
	m.stop(f.tb)
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

// unstable returns why the fleet has not settled (fleettest.Unstable),
// and a channel closed at the next change of the node in question.
func (f *testFleet) unstable() (string, <-chan struct{}) { return fleettest.Unstable(f.nodes()) }

// nodes returns the members' nodes, by ID.
func (f *testFleet) nodes() []*ownership.Node {
	ms := f.list()
	nodes := make([]*ownership.Node, len(ms))
	for i, m := range ms {
		nodes[i] = m.node
	}
	return nodes
}

func (f *testFleet) waitStable() {
	f.tb.Helper()
	waitUntil(f.tb, 30*time.Second, "fleet did not settle", f.unstable)
}

// waitUntil is fleettest.WaitUntil.
func waitUntil(tb testing.TB, timeout time.Duration, what string, check func() (string, <-chan struct{})) {
	tb.Helper()
	fleettest.WaitUntil(tb, timeout, what, check)
}

// owner returns the member that serves key.
func (f *testFleet) owner(key string) *member {
	for _, m := range f.list() {
		if m.node.Lookup(key).Local {
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

// newClient returns a grpcroute.Client that routes counter calls by their
// request's key, and its connection to fleet name.
func newClient(tb testing.TB, cli *clientv3.Client, name string, cfg grpcroute.ClientConfig, opts ...grpc.DialOption) (*grpcroute.Client, counterpb.CounterClient) {
	tb.Helper()
	if cfg.Key == nil {
		cfg.Key = requestKey
	}
	c, err := grpcroute.NewClient(cli, cfg)
	require.NoError(tb, err)
	conn, err := c.NewConn(grpcroute.Target(name), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = conn.Close()
		c.Close()
	})
	return c, counterpb.NewCounterClient(conn)
}

// requestKey is the KeyFunc of the counter service: the request's key.
func requestKey(_ context.Context, _ string, req any) (string, error) {
	type keyed interface{ GetKey() string }
	if r, ok := req.(keyed); ok && r.GetKey() != "" {
		return r.GetKey(), nil
	}
	return "", grpcroute.ErrNoKey
}

// store is the counters of a test fleet, shared by its nodes and fenced
// by one Gate that every node advances when it acquires a partition.
// Each idempotency key is applied once.
type store struct {
	gate fence.Gate

	mu      sync.Mutex
	values  map[string]int64
	applied map[string]int64 // idempotency key -> value after it
	pause   func(ctx context.Context, key string)
	refuse  func(ctx context.Context, key string) error // if set and it returns an error, add fails with it
}

func newStore() *store { return &store{values: map[string]int64{}, applied: map[string]int64{}} }

// add adds delta to key under ctx's token, once per idem.
func (s *store) add(ctx context.Context, key string, delta int64, idem string) (int64, fence.Token, error) {
	tok, ok := fence.FromContext(ctx)
	if !ok {
		return 0, tok, status.Error(codes.Internal, "no token")
	}
	s.mu.Lock()
	pause, refuse := s.pause, s.refuse
	s.mu.Unlock()
	if pause != nil {
		pause(ctx, key)
	}
	if refuse != nil {
		if err := refuse(ctx, key); err != nil {
			return 0, tok, err
		}
	}
	var v int64
	err := s.gate.Do(tok, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if prev, ok := s.applied[idem]; ok && idem != "" {
			v = prev
			return nil
		}
		s.values[key] += delta
		v = s.values[key]
		s.applied[idem] = v
		return nil
	})
	return v, tok, err
}

func (s *store) value(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key]
}

// counterService serves a node's counters from the store.
type counterService struct {
	counterpb.UnimplementedCounterServer
	id    string
	store *store
}

func (c *counterService) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	v, tok, err := c.store.add(ctx, req.Key, req.Delta, grpcroute.IdempotencyKey(ctx))
	if err != nil {
		return nil, err
	}
	return &counterpb.AddReply{Value: v, Node: c.id, Epoch: tok.Epoch}, nil
}

// recvDeltas reads an AddStream call's requests until the client closes
// it, and returns their key and the sum of their deltas.
func recvDeltas(s grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) (key string, delta int64, err error) {
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return key, delta, nil
		}
		if err != nil {
			return "", 0, err
		}
		key, delta = req.Key, delta+req.Delta
	}
}

func (c *counterService) AddStream(s grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) error {
	key, delta, err := recvDeltas(s)
	if err != nil {
		return err
	}
	v, tok, err := c.store.add(s.Context(), key, delta, grpcroute.IdempotencyKey(s.Context()))
	if err != nil {
		return err
	}
	return s.SendAndClose(&counterpb.AddReply{Value: v, Node: c.id, Epoch: tok.Epoch})
}

func (c *counterService) Get(ctx context.Context, req *counterpb.GetRequest) (*counterpb.GetReply, error) {
	tok, _ := fence.FromContext(ctx)
	return &counterpb.GetReply{Value: c.store.value(req.Key), Node: c.id, Epoch: tok.Epoch}, nil
}
