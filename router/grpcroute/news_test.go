package grpcroute_test

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestRetriesAtOnceOnNews: on a clock that never moves (every backoff
// delay would last forever), a refused call's retry still goes out when
// the refusal's hint names a newer claim, or the next owner of the claim
// that ended, and when the connection's view of the partition moves away
// from the node that refused while the call waits; each call ends with
// its answer after two attempts.
func TestRetriesAtOnceOnNews(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	const P = 8
	h := fleettest.NewHandmade(t, cli, "news")
	h.Spec(P)
	frozen := clockwork.NewFakeClock()
	c, err := grpcroute.NewClient(cli, grpcroute.ClientConfig{Key: requestKey, Clock: frozen,
		Backoff: router.Backoff{MaxAttempts: 5, Initial: time.Hour, Max: time.Hour}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	conn, err := c.NewConn(grpcroute.Target("news"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	conn.Connect() // read the fleet now
	counter := counterpb.NewCounterClient(conn)

	okAddr := fakeCounter(t, func(context.Context, *counterpb.AddRequest) (*counterpb.AddReply, error) {
		return &counterpb.AddReply{Node: "ok"}, nil
	})
	h.Member("ok", okAddr)
	h.Claim(P-1, "ok")
	fleettest.WaitRoute(t, conn, keyIn(P-1), okAddr)
	// call makes an Add call for key, which must be answered by ok after
	// the given attempts.
	call := func(t *testing.T, key string, attempts int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		before := c.Stats()
		reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
		require.NoError(t, err, "the retry waited a backoff delay")
		assert.Equal(t, "ok", reply.Node)
		after := c.Stats()
		assert.Equal(t, before.Attempts+attempts, after.Attempts)
		assert.Equal(t, before.Retries+attempts-1, after.Retries)
	}
	call(t, keyIn(P-1), 1) // the connection to ok is ready: a hint naming it can be followed

	for p, tc := range []struct {
		name  string
		epoch func(current int64) int64 // the hint's epoch, given the refused claim's
	}{
		{"hint names a newer claim", func(current int64) int64 { return current + 1000 }},
		{"hint names the next owner of the claim that ended", func(int64) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var epoch atomic.Int64
			old := "old" + strconv.Itoa(p)
			oldAddr := fakeCounter(t, func(context.Context, *counterpb.AddRequest) (*counterpb.AddReply, error) {
				return nil, refused(&tenurepb.Refusal{Kind: tenurepb.Refusal_NOT_OWNER, Retryable: true,
					Partition: uint32(p), Owner: "ok", Addr: okAddr, Epoch: tc.epoch(epoch.Load())})
			})
			h.Member(old, oldAddr)
			epoch.Store(h.Claim(p, old))
			fleettest.WaitRoute(t, conn, keyIn(p), oldAddr)
			call(t, keyIn(p), 2)
		})
	}

	t.Run("the view moves while the call waits", func(t *testing.T) {
		const p = 2
		oldAddr := fakeCounter(t, func(context.Context, *counterpb.AddRequest) (*counterpb.AddReply, error) {
			return nil, refused(&tenurepb.Refusal{Kind: tenurepb.Refusal_HANDOFF, Retryable: true, Partition: p})
		})
		h.Member("old2", oldAddr)
		h.Claim(p, "old2")
		fleettest.WaitRoute(t, conn, keyIn(p), oldAddr)
		done := make(chan struct{})
		go func() {
			defer close(done)
			call(t, keyIn(p), 2)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, frozen.BlockUntilContext(ctx, 1), "the refused call does not wait")
		h.Claim(p, "ok")
		<-done
	})
}

// keyIn returns a key of partition p of the fleet's P = 8 partitions.
func keyIn(p int) string {
	for i := 0; ; i++ {
		if k := "k" + strconv.Itoa(i); ring.PartitionOf(k, 8) == p {
			return k
		}
	}
}

// refused returns the status error that carries ref, as a node sends it.
func refused(ref *tenurepb.Refusal) error {
	st, err := status.New(codes.Unavailable, "refused by the test").WithDetails(ref)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// fakeCounter serves the counter service on loopback with add as its Add,
// and returns its address: a server that plays a node.
func fakeCounter(t *testing.T, add func(context.Context, *counterpb.AddRequest) (*counterpb.AddReply, error)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	counterpb.RegisterCounterServer(srv, addFunc{add: add})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

type addFunc struct {
	counterpb.UnimplementedCounterServer
	add func(context.Context, *counterpb.AddRequest) (*counterpb.AddReply, error)
}

func (f addFunc) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	return f.add(ctx, req)
}
