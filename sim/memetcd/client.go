package memetcd

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tenure-go/tenure/internal/clock"
)

// ClientID identifies a client of a Server, for its fault hooks.
type ClientID int

// Client is one etcd client of a Server: it implements clientv3.KV,
// clientv3.Lease and clientv3.Watcher (so it satisfies ownership.Client
// and what election needs). Its KV and Watcher are the etcd client's own
// implementations over in-memory transports. A Client is safe for
// concurrent use.
type Client struct {
	clientv3.KV
	clientv3.Watcher
	leaseAPI

	s      *Server
	id     ClientID
	ctx    context.Context
	cancel context.CancelFunc

	// fault state, guarded by s.mu
	partitioned bool
	latency     time.Duration
	lose        int
	closed      bool
	streams     []*watchStream
	stats       Stats
}

var _ interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
} = (*Client)(nil)

// NewClient returns a new client of s. Close it when done.
func (s *Server) NewClient() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Client{s: s, id: ClientID(len(s.clients) + 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if s.closed {
		c.closed = true
		c.cancel()
	}
	c.KV = clientv3.NewKVFromKVClient(kvRemote{c}, nil)
	c.Watcher = clientv3.NewWatchFromWatchClient(watchRemote{c}, clientv3.NewCtxClient(c.ctx))
	c.leaseAPI = leaseAPI{c}
	s.clients = append(s.clients, c)
	return c
}

// ID returns the client's ID, for the server's fault hooks.
func (c *Client) ID() ClientID { return c.id }

// Ctx returns a context that ends when the client is closed, as
// (*clientv3.Client).Ctx does.
func (c *Client) Ctx() context.Context { return c.ctx }

// Close closes the client: its watches end, its keep-alives stop, and its
// calls fail from then on. It is idempotent.
func (c *Client) Close() error {
	s := c.s
	s.mu.Lock()
	if c.closed && c.ctx.Err() != nil {
		s.mu.Unlock()
		return nil
	}
	c.closed = true
	s.signalLocked()
	s.mu.Unlock()
	c.cancel()
	return c.Watcher.Close()
}

// gate waits until c may reach the server: not partitioned, the server
// has a leader. It returns the error the real client would see if ctx ends
// first or the client is closed.
func (c *Client) gate(ctx context.Context) error {
	s := c.s
	for {
		s.mu.Lock()
		if c.closed {
			s.mu.Unlock()
			return rpcClosing
		}
		if !c.partitioned && !s.leaderless {
			s.mu.Unlock()
			return nil
		}
		if !c.partitioned && requiresLeader(ctx) {
			s.mu.Unlock()
			return rpcNoLeader // etcd's interceptor refuses at once
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// requiresLeader reports whether ctx carries clientv3.WithRequireLeader.
func requiresLeader(ctx context.Context) bool {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return false
	}
	v := md[rpctypes.MetadataRequireLeaderKey]
	return len(v) > 0 && v[0] == rpctypes.MetadataHasLeader
}

// unary runs apply as one request of c, with c's faults: the request waits
// out a partition or a leaderless server and the latency, then apply runs
// under the server's lock (after due leases expired); the response waits
// out the latency and may be lost. A hook, if given, runs once the request
// has passed the faults, before it is applied, without the lock; the func
// it returns (if not nil) gets apply's result, also without the lock.
func unary[T proto.Message](ctx context.Context, c *Client, kind requestKind, apply func(s *Server) (T, error), hook ...func() func(T, error)) (T, error) {
	var zero T
	s := c.s
	if err := c.gate(ctx); err != nil {
		return zero, err
	}
	s.mu.Lock()
	d := c.latency
	s.mu.Unlock()
	if d > 0 && !clock.Sleep(ctx, s.clock, d) {
		return zero, status.FromContextError(ctx.Err()).Err()
	}
	if err := c.gate(ctx); err != nil {
		return zero, err
	}
	var applied func(T, error)
	if len(hook) > 0 && hook[0] != nil {
		applied = hook[0]()
	}
	s.mu.Lock()
	s.expireLocked()
	before := s.st.rev
	resp, err := apply(s)
	s.countLocked(c, kind, s.st.rev-before)
	lost := false
	if c.lose > 0 {
		c.lose--
		lost = true
	}
	s.mu.Unlock()
	if applied != nil {
		applied(resp, err)
	}
	if d > 0 && !clock.Sleep(ctx, s.clock, d) {
		return zero, status.FromContextError(ctx.Err()).Err()
	}
	if lost {
		return zero, rpcLost
	}
	if err != nil {
		return zero, err
	}
	return wire(resp), nil
}

// wire returns a copy of m as it would arrive over gRPC.
func wire[T proto.Message](m T) T {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("memetcd: marshal " + err.Error()) // our own messages always marshal
	}
	out := m.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, out); err != nil {
		panic("memetcd: unmarshal " + err.Error())
	}
	return out
}

// --- faults per client ---

func (s *Server) client(id ClientID) *Client {
	if id < 1 || int(id) > len(s.clients) {
		return nil
	}
	return s.clients[id-1]
}

// Partition cuts client id off the server, as a blackholed connection
// does: its requests (keep-alives included) wait until Heal or until their
// context ends, and its watches receive nothing; watch requests sent
// meanwhile are delivered at Heal. An unknown id is ignored.
func (s *Server) Partition(id ClientID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.client(id); c != nil {
		c.partitioned = true
		s.signalLocked()
	}
}

// Heal ends client id's partition: waiting requests proceed and held
// watch traffic flows, in order.
func (s *Server) Heal(id ClientID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.client(id)
	if c == nil || !c.partitioned {
		return
	}
	c.partitioned = false
	for _, ws := range c.streams {
		ws.flushLocked()
	}
	s.signalLocked()
}

// SetLatency delays every later request of client id by d on the server's
// clock before it is applied, and its response by d after: a request whose
// context ends during the second delay was applied although its caller
// sees a timeout. Zero removes the delay. Watches are not delayed.
func (s *Server) SetLatency(id ClientID, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.client(id); c != nil {
		c.latency = max(d, 0)
	}
}

// LoseResponses makes the next n requests of client id be applied and
// their responses lost, as when the connection breaks after the request
// was delivered: the caller gets a gRPC Unavailable error and cannot know
// whether its write landed. (KeepAliveOnce retries such errors, as the
// real client does.)
func (s *Server) LoseResponses(id ClientID, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.client(id); c != nil {
		c.lose = max(n, 0)
	}
}

// DropWatches breaks client id's watch streams, as a dropped connection
// does: the etcd client reconnects and resumes every watch from the
// revision after the last one it delivered.
func (s *Server) DropWatches(id ClientID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.client(id)
	if c == nil {
		return
	}
	for _, ws := range slices.Clone(c.streams) {
		ws.failLocked(rpcDropped)
	}
}

// --- KV transport ---

// kvRemote is the etcdserverpb.KVClient that a Client's clientv3.KV talks
// to.
type kvRemote struct{ c *Client }

var _ pb.KVClient = kvRemote{}

func (r kvRemote) Range(ctx context.Context, in *pb.RangeRequest, _ ...grpcCallOption) (*pb.RangeResponse, error) {
	if err := checkRangeRequest(in); err != nil {
		return nil, err
	}
	return unary(ctx, r.c, kindRead, func(s *Server) (*pb.RangeResponse, error) {
		resp, err := s.rangeLocked(in, s.st.rev)
		if err != nil {
			return nil, err
		}
		s.fill(resp.Header)
		return resp, nil
	})
}

func (r kvRemote) Put(ctx context.Context, in *pb.PutRequest, _ ...grpcCallOption) (*pb.PutResponse, error) {
	if err := checkPutRequest(in); err != nil {
		return nil, err
	}
	return unary(ctx, r.c, kindWrite, func(s *Server) (*pb.PutResponse, error) {
		if err := s.checkPut(in); err != nil {
			return nil, err
		}
		resp := s.putLocked(in)
		s.commitLocked()
		s.fill(resp.Header)
		return resp, nil
	})
}

func (r kvRemote) DeleteRange(ctx context.Context, in *pb.DeleteRangeRequest, _ ...grpcCallOption) (*pb.DeleteRangeResponse, error) {
	if err := checkDeleteRequest(in); err != nil {
		return nil, err
	}
	return unary(ctx, r.c, kindWrite, func(s *Server) (*pb.DeleteRangeResponse, error) {
		resp := s.deleteLocked(in)
		s.commitLocked()
		s.fill(resp.Header)
		return resp, nil
	})
}

func (r kvRemote) Txn(ctx context.Context, in *pb.TxnRequest, _ ...grpcCallOption) (*pb.TxnResponse, error) {
	return unary(ctx, r.c, txnKind(in), func(s *Server) (*pb.TxnResponse, error) {
		resp, err := s.txnLocked(in)
		if err != nil {
			return nil, err
		}
		s.commitLocked()
		s.fill(resp.Header)
		return resp, nil
	}, r.txnHook(in))
}

// txnHook returns the hook of unary that tells the server's TxnFunc, if
// any, of the transaction in.
func (r kvRemote) txnHook(in *pb.TxnRequest) func() func(*pb.TxnResponse, error) {
	return func() func(*pb.TxnResponse, error) {
		s := r.c.s
		s.mu.Lock()
		f := s.onTxn
		s.mu.Unlock()
		if f == nil {
			return nil
		}
		return f(r.c.id, in)
	}
}

func (r kvRemote) Compact(ctx context.Context, in *pb.CompactionRequest, _ ...grpcCallOption) (*pb.CompactionResponse, error) {
	return unary(ctx, r.c, kindWrite, func(s *Server) (*pb.CompactionResponse, error) {
		resp, err := s.compactLocked(in.Revision)
		if err != nil {
			return nil, err
		}
		s.fill(resp.Header)
		return resp, nil
	})
}

func (r kvRemote) RangeStream(ctx context.Context, in *pb.RangeRequest, opts ...grpcCallOption) (grpcRangeStream, error) {
	if !isDefaultOrdering(in.SortTarget, in.SortOrder) || hasRevisionFilters(in) {
		return nil, status.Errorf(codes.Unimplemented, "RangeStream does not support custom sort orders or revision filters")
	}
	resp, err := r.Range(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return &rangeStream{ctx: ctx, resp: &pb.RangeStreamResponse{RangeResponse: resp}}, nil
}

// Reconnect models clients that were cut off (or not) coming back on new
// connections: for every client in ids, its watch streams break, as in
// DropWatches, and its partition ends, as in Heal, with one wake-up for
// all. The etcd client then resumes every watch from the revision after
// the last one it delivered (the responses queued on the old streams are
// lost with the old connection), and etcd answers the catch-up in batches
// of up to 1000 revisions per response, so a client that missed many
// revisions catches up in a few responses.
func (s *Server) Reconnect(ids ...ClientID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		c := s.client(id)
		if c == nil {
			continue
		}
		for _, ws := range slices.Clone(c.streams) {
			ws.out = nil // lost with the old connection
			ws.held = nil
			ws.failLocked(rpcDropped)
		}
		c.partitioned = false
	}
	s.signalLocked()
}
