package grpcroute_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// holdSpy is a node that tells which keys its Hold has refused: the calls
// for them wait in the Server's interceptor.
type holdSpy struct {
	*ownership.Node
	fleettest.Refusals
}

func (s *holdSpy) Hold(key string) (ownership.Held, error) {
	h, err := s.Node.Hold(key)
	s.Record(key, err)
	return h, err
}

// gatedCounter serves counters in memory, recording each call's key and
// whether OnAcquired had returned when it ran.
type gatedCounter struct {
	counterpb.UnimplementedCounterServer
	returned *atomic.Bool
	early    atomic.Int64
	served   chan string
}

func (g *gatedCounter) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	if !g.returned.Load() {
		g.early.Add(1)
	}
	g.served <- req.Key
	return &counterpb.AddReply{Value: req.Delta}, nil
}

func (g *gatedCounter) AddStream(s grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) error {
	key, delta, err := recvDeltas(s)
	if err != nil {
		return err
	}
	if !g.returned.Load() {
		g.early.Add(1)
	}
	g.served <- key
	return s.SendAndClose(&counterpb.AddReply{Value: delta})
}

// TestCallsWaitForOnAcquired is router's TestCallsWaitForOnAcquired over
// gRPC: unary and streaming calls that reach a node while the OnAcquired
// of their partition runs wait in the Server's interceptor and are
// answered once OnAcquired has returned: neither refused nor served
// before it.
func TestCallsWaitForOnAcquired(t *testing.T) {
	etcd := cluster.New(t, 1)
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	var returned atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := ownership.DefaultConfig()
	cfg.Cluster = "starting"
	cfg.NodeID = "a"
	cfg.Addr = ln.Addr().String()
	cfg.Ring.Partitions = 1 // every key in partition 0
	cfg.Session.TTL = 2 * time.Second
	cfg.AcquiredTimeout = time.Hour // only OnAcquired's return admits work here
	cfg.Callbacks.OnAcquired = func(e ownership.Event) {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-e.Context.Done():
		}
		returned.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := ownership.Join(ctx, etcd.NewClient(t), cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, node.Close(context.Background())) }()
	spy := &holdSpy{Node: node}
	rs, err := grpcroute.NewServer(spy, grpcroute.ServerConfig{HandoffWait: time.Hour}) // bounded by the calls' ctx
	require.NoError(t, err)
	defer rs.Close()
	svc := &gatedCounter{returned: &returned, served: make(chan string, 2)}
	srv := grpc.NewServer(rs.ServerOptions()...)
	counterpb.RegisterCounterServer(srv, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	defer func() {
		srv.GracefulStop()
		<-done
	}()
	<-entered

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := counterpb.NewCounterClient(conn)
	unary := make(chan error, 1)
	go func() {
		_, err := client.Add(metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataKey, "unary"),
			&counterpb.AddRequest{Key: "unary", Delta: 1})
		unary <- err
	}()
	stream := make(chan error, 1)
	go func() {
		s, err := client.AddStream(metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataKey, "stream"))
		if err == nil {
			err = s.Send(&counterpb.AddRequest{Key: "stream", Delta: 2})
		}
		if err == nil {
			_, err = s.CloseAndRecv()
		}
		stream <- err
	}()

	spy.WaitRefused(t, svc.served, "unary", "stream") // both calls wait for the node
	require.False(t, node.Lookup("unary").Local)
	close(gate)

	require.NoError(t, <-unary)
	require.NoError(t, <-stream)
	assert.Zero(t, svc.early.Load(), "calls served before OnAcquired returned")
	st := rs.Stats()
	assert.Equal(t, int64(2), st.Served)
	assert.Zero(t, st.Refused)
}
