package grpcroute_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// arrival is an attempt that reached a test node: its idempotency key,
// the deltas it carried, and its context, which ends when the client cuts
// the attempt off.
type arrival struct {
	idem   string
	deltas []int64
	ctx    context.Context
}

// slowNode is a test server that plays a node: each attempt of Add or
// AddStream is reported on arrivals (a stream's once the caller closed
// its side), then answered by answer, which may wait.
type slowNode struct {
	counterpb.UnimplementedCounterServer
	arrivals chan arrival

	mu     sync.Mutex
	answer func(a arrival, s grpc.ServerStream) (*counterpb.AddReply, error)
}

// answers sets how n answers the attempts that arrive from now on.
func (n *slowNode) answers(answer func(a arrival, s grpc.ServerStream) (*counterpb.AddReply, error)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.answer = answer
}

func (n *slowNode) reply(a arrival, s grpc.ServerStream) (*counterpb.AddReply, error) {
	n.mu.Lock()
	answer := n.answer
	n.mu.Unlock()
	n.arrivals <- a
	return answer(a, s)
}

func (n *slowNode) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	return n.reply(arrival{idem: grpcroute.IdempotencyKey(ctx), deltas: []int64{req.Delta}, ctx: ctx}, nil)
}

func (n *slowNode) AddStream(s grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) error {
	a := arrival{idem: grpcroute.IdempotencyKey(s.Context()), ctx: s.Context()}
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		a.deltas = append(a.deltas, req.Delta)
	}
	reply, err := n.reply(a, s)
	if err != nil {
		return err
	}
	return s.SendAndClose(reply)
}

// startSlowNode serves n on loopback and returns its address.
func startSlowNode(t *testing.T, n *slowNode) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	counterpb.RegisterCounterServer(srv, n)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// firstWaits answers an attempt that carries none of the idempotency keys
// seen before only when the client cuts it off, and any later attempt of
// the same call with the sum of its deltas (sum).
func firstWaits() func(a arrival, _ grpc.ServerStream) (*counterpb.AddReply, error) {
	var mu sync.Mutex // a retry may arrive while the attempt it replaces still returns
	seen := map[string]bool{}
	return func(a arrival, s grpc.ServerStream) (*counterpb.AddReply, error) {
		mu.Lock()
		first := !seen[a.idem]
		seen[a.idem] = true
		mu.Unlock()
		if first {
			<-a.ctx.Done()
			return nil, status.FromContextError(a.ctx.Err()).Err()
		}
		return sum(a, s)
	}
}

// sum answers an attempt at once with the sum of its deltas.
func sum(a arrival, _ grpc.ServerStream) (*counterpb.AddReply, error) {
	var v int64
	for _, d := range a.deltas {
		v += d
	}
	return &counterpb.AddReply{Node: "slow", Value: v}, nil
}

// TestAttemptTimeout, on a clock that moves only when told, against a
// test server that plays a node: an attempt that has no answer within
// AttemptTimeout once the balancer sent it is cut off (the node sees its
// context end) and sent again with the same idempotency key, a stream's
// with the messages sent so far; the error of an attempt cut off says so;
// a stream is not cut off while its caller sends rather than waits, nor
// once its node sent its header.
func TestAttemptTimeout(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	const P, bound = 8, time.Second
	h := fleettest.NewHandmade(t, cli, "bound")
	h.Spec(P)
	node := &slowNode{arrivals: make(chan arrival, 16)}
	addr := startSlowNode(t, node)
	h.Member("slow", addr)
	h.Claim(3, "slow")
	key := keyIn(3)

	// client returns a Client on its own fake clock, with cfg, and its
	// connection to the fleet, which routes key to the test node.
	client := func(t *testing.T, cfg grpcroute.ClientConfig) (*grpcroute.Client, counterpb.CounterClient, *clockwork.FakeClock) {
		t.Helper()
		fc := clockwork.NewFakeClock()
		cfg.Key, cfg.Clock, cfg.AttemptTimeout = requestKey, fc, bound
		c, err := grpcroute.NewClient(cli, cfg)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		conn, err := c.NewConn(grpcroute.Target("bound"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		conn.Connect()
		fleettest.WaitRoute(t, conn, key, addr)
		return c, counterpb.NewCounterClient(conn), fc
	}
	// tick waits until the client's clock has a timer (an attempt's bound
	// or a backoff delay) and moves it by the bound.
	tick := func(t *testing.T, fc *clockwork.FakeClock) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, fc.BlockUntilContext(ctx, 1), "no timer on the client's clock")
		fc.Advance(bound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("unary", func(t *testing.T) {
		node.answers(firstWaits())
		reg := prometheus.NewRegistry()
		c, counter, fc := client(t, grpcroute.ClientConfig{Metrics: reg})
		done := make(chan error, 1)
		go func() {
			reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 5})
			if err == nil && reply.Value != 5 {
				err = errors.New("wrong reply " + reply.String())
			}
			done <- err
		}()
		first := <-node.arrivals
		tick(t, fc) // the bound passes: the attempt is cut off
		<-first.ctx.Done()
		tick(t, fc) // the backoff delay before the retry
		second := <-node.arrivals
		require.NoError(t, <-done)
		assert.NotEmpty(t, first.idem)
		assert.Equal(t, first.idem, second.idem, "every attempt carries the call's idempotency key")
		st := c.Stats()
		assert.Equal(t, grpcroute.ClientStats{Attempts: 2, Retries: 1, Retried: 1}, st)
		assert.Equal(t, 1.0, counterValue(t, reg, "tenure_grpc_client_retries_total", nil))
		assert.Equal(t, 1.0, counterValue(t, reg, "tenure_grpc_client_calls_total", map[string]string{"result": "retried"}))
	})

	t.Run("unary error", func(t *testing.T) {
		node.answers(firstWaits())
		_, counter, fc := client(t, grpcroute.ClientConfig{Backoff: router.Backoff{MaxAttempts: 1}})
		done := make(chan error, 1)
		go func() {
			_, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
			done <- err
		}()
		first := <-node.arrivals
		tick(t, fc)
		<-first.ctx.Done()
		err := <-done
		require.ErrorIs(t, err, router.ErrAttemptTimeout)
		assert.ErrorIs(t, err, grpcroute.ErrRetriesExhausted)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.Contains(t, err.Error(), addr+" did not answer within 1s (AttemptTimeout; the fleet's session TTL is 10s)")
	})

	t.Run("stream", func(t *testing.T) {
		node.answers(firstWaits())
		c, counter, fc := client(t, grpcroute.ClientConfig{})
		s, err := counter.AddStream(grpcroute.WithKey(ctx, key))
		require.NoError(t, err)
		require.NoError(t, s.Send(&counterpb.AddRequest{Key: key, Delta: 1}))
		require.NoError(t, s.Send(&counterpb.AddRequest{Key: key, Delta: 2}))
		type answer struct {
			reply *counterpb.AddReply
			err   error
		}
		done := make(chan answer, 1)
		go func() {
			reply, err := s.CloseAndRecv()
			done <- answer{reply, err}
		}()
		first := <-node.arrivals
		tick(t, fc) // the caller has waited the bound since it closed: cut off
		<-first.ctx.Done()
		tick(t, fc)
		second := <-node.arrivals
		got := <-done
		require.NoError(t, got.err)
		assert.Equal(t, int64(3), got.reply.Value)
		assert.Equal(t, []int64{1, 2}, second.deltas, "the messages were sent again")
		assert.Equal(t, first.idem, second.idem)
		assert.Equal(t, grpcroute.ClientStats{Attempts: 2, Retries: 1, Retried: 1}, c.Stats())
	})

	t.Run("long upload", func(t *testing.T) {
		node.answers(sum)
		c, counter, fc := client(t, grpcroute.ClientConfig{})
		s, err := counter.AddStream(grpcroute.WithKey(ctx, key))
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, s.Send(&counterpb.AddRequest{Key: key, Delta: int64(i)}))
			fc.Advance(10 * bound) // the caller works between its messages; nobody waits
		}
		reply, err := s.CloseAndRecv()
		require.NoError(t, err)
		assert.Equal(t, int64(3), reply.Value)
		<-node.arrivals
		assert.Equal(t, grpcroute.ClientStats{Attempts: 1, OK: 1}, c.Stats())
	})

	t.Run("header first", func(t *testing.T) {
		release := make(chan struct{})
		node.answers(func(a arrival, s grpc.ServerStream) (*counterpb.AddReply, error) {
			if err := s.SendHeader(metadata.Pairs("working", "yes")); err != nil {
				return nil, err
			}
			<-release
			return &counterpb.AddReply{Node: "slow"}, nil
		})
		c, counter, fc := client(t, grpcroute.ClientConfig{})
		s, err := counter.AddStream(grpcroute.WithKey(ctx, key))
		require.NoError(t, err)
		require.NoError(t, s.Send(&counterpb.AddRequest{Key: key, Delta: 1}))
		require.NoError(t, s.CloseSend())
		md, err := s.Header()
		require.NoError(t, err)
		assert.Equal(t, []string{"yes"}, md.Get("working"))
		done := make(chan error, 1)
		go func() {
			var reply counterpb.AddReply
			done <- s.RecvMsg(&reply)
		}()
		<-node.arrivals
		fc.Advance(10 * bound) // the node answered: its silence since is not cut off
		close(release)
		require.NoError(t, <-done)
		assert.Equal(t, grpcroute.ClientStats{Attempts: 1, OK: 1}, c.Stats())
	})
}
