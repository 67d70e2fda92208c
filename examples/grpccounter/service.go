package main

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/router/grpcroute"
)

// service is the Counter service of one node. grpcroute.Server runs its
// methods only for keys this node owns, with the partition's token in the
// context; an error that says the tenure ended (a stale write) is turned
// into the retryable refusal by the interceptor.
type service struct {
	counterpb.UnimplementedCounterServer
	id    string
	store store
}

// store keeps the counters: etcdStore (etcdstore.go), or sqlStore
// (sqlstore.go) with --db. Both write under the call's token, so that a
// former owner's write is refused.
type store interface {
	// add adds delta to key's counter, once per idempotency key id, and
	// returns the counter's value after the call that id names.
	add(ctx context.Context, t fence.Token, key string, delta int64, id string) (int64, error)
	// get returns key's counter.
	get(ctx context.Context, t fence.Token, key string) (int64, error)
}

func token(ctx context.Context) (fence.Token, error) {
	t, ok := fence.FromContext(ctx)
	if !ok {
		return t, status.Error(codes.Internal, "grpccounter: no fencing token: the service runs behind grpcroute.Server")
	}
	return t, nil
}

func (s *service) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	t, err := token(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.store.add(ctx, t, req.Key, req.Delta, grpcroute.IdempotencyKey(ctx))
	if err != nil {
		return nil, err
	}
	return &counterpb.AddReply{Value: v, Node: s.id, Epoch: t.Epoch}, nil
}

func (s *service) AddStream(stream grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) error {
	ctx := stream.Context()
	t, err := token(ctx)
	if err != nil {
		return err
	}
	key, _ := grpcroute.KeyFromContext(ctx)
	var delta int64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if req.Key != key {
			return status.Errorf(codes.InvalidArgument, "grpccounter: request for key %q in a stream of key %q", req.Key, key)
		}
		delta += req.Delta
	}
	v, err := s.store.add(ctx, t, key, delta, grpcroute.IdempotencyKey(ctx))
	if err != nil {
		return err
	}
	return stream.SendAndClose(&counterpb.AddReply{Value: v, Node: s.id, Epoch: t.Epoch})
}

func (s *service) Get(ctx context.Context, req *counterpb.GetRequest) (*counterpb.GetReply, error) {
	t, err := token(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.store.get(ctx, t, req.Key)
	if err != nil {
		return nil, err
	}
	return &counterpb.GetReply{Value: v, Node: s.id, Epoch: t.Epoch}, nil
}
