// Package etcderr classifies errors of etcd client calls, in the forms the
// client returns them (an etcd error, or the gRPC status it came in).
package etcderr

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// LeaseNotFound reports whether err says that etcd has no such lease
// (revoked, or expired).
func LeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// TooManyOps reports whether err says that a transaction had more
// operations than the server's --max-txn-ops.
func TooManyOps(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrGRPCTooManyOps)
}

// ClientClosed reports whether err is the error of a call through an etcd
// client that has been closed: gRPC's status for a call on a closing client
// connection (grpc.ErrClientConnClosing), which the etcd client passes on
// unchanged when the call's own context is still live. gRPC status errors
// match by code and message through their Is method.
func ClientClosed(err error) bool {
	return errors.Is(err, grpc.ErrClientConnClosing)
}
