package grpcroute_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// downstream is a plain gRPC counter server whose Get waits until its
// call ends.
type downstream struct {
	counterpb.UnimplementedCounterServer
	started chan struct{}
	ended   chan struct{}
}

func (d *downstream) Get(ctx context.Context, _ *counterpb.GetRequest) (*counterpb.GetReply, error) {
	close(d.started)
	<-ctx.Done()
	close(d.ended)
	return nil, ctx.Err()
}

// A handler that passes its context to an outgoing gRPC call: the call
// carries the handler's deadline, and ends when the routed call's caller
// goes away.
func TestHandlerOutgoingCall(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "outgoing", false)
	f.start("a")
	f.waitStable()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	down := &downstream{started: make(chan struct{}), ended: make(chan struct{})}
	counterpb.RegisterCounterServer(srv, down)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	downCli := counterpb.NewCounterClient(dial(t, ln.Addr().String()))

	type seen struct {
		err      error
		deadline bool
		token    bool
	}
	got := make(chan seen, 1)
	f.store.pause = func(ctx context.Context, key string) {
		_, hasDeadline := ctx.Deadline()
		_, hasToken := fence.FromContext(ctx)
		_, err := downCli.Get(ctx, &counterpb.GetRequest{Key: key})
		got <- seen{err: err, deadline: hasDeadline, token: hasToken}
	}
	_, counter := newClient(t, f.cli, "outgoing", grpcroute.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	callErr := make(chan error, 1)
	go func() {
		_, err := counter.Add(ctx, &counterpb.AddRequest{Key: "out", Delta: 1})
		callErr <- err
	}()
	<-down.started
	cancel()
	<-down.ended
	s := <-got
	assert.Equal(t, codes.Canceled, status.Code(s.err), "%v", s.err)
	assert.True(t, s.deadline, "the handler's context has the caller's deadline")
	assert.True(t, s.token, "the handler's context has the token")
	assert.Equal(t, codes.Canceled, status.Code(<-callErr))
}
