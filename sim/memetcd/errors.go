package memetcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrInvalidConfig reports a Config that New refuses.
var ErrInvalidConfig = errors.New("memetcd: invalid config")

// The errors a Client's calls fail with are etcd's own, in the form the
// etcd client returns them (rpctypes errors, gRPC statuses, the context's
// error); these are the ones memetcd raises itself.
var (
	rpcLeaseTTLTooLarge = rpctypes.ErrGRPCLeaseTTLTooLarge
	rpcNoLeader         = rpctypes.ErrGRPCNoLeader
	// rpcClosing is what gRPC answers on a closed connection.
	rpcClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")
	// rpcLost is what a caller sees when the connection breaks after its
	// request was delivered (LoseResponses).
	rpcLost = status.Error(codes.Unavailable, "memetcd: connection lost before the response arrived")
	// rpcDropped ends watch streams broken by DropWatches.
	rpcDropped = status.Error(codes.Unavailable, "memetcd: connection dropped")
)

// errEmptyWatcherRange is etcd's mvcc.ErrEmptyWatcherRange message, the
// cancel reason of a watch whose range end is not after its key.
const errEmptyWatcherRange = "mvcc: watcher range is empty"
