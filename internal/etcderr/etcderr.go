// Package etcderr classifies errors of etcd client calls, in the forms the
// client returns them (an etcd error, or the gRPC status it came in).
package etcderr

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// The messages of etcd's answers, with code Unknown, to a write that a
// member's raft node did not take: it stopped while it held the call
// (raft.ErrStopped: the member was removed or shuts down), or it dropped
// the proposal (raft.ErrProposalDropped: the member knew no leader, or
// its leadership was being handed to another member).
const (
	raftStopped         = "raft: stopped"
	raftProposalDropped = "raft proposal dropped"
)

// Unavailable reports whether err says that etcd could not serve a call
// for now, so that the same call may succeed later or through another
// member: no leader, a leader change, an etcd-side timeout, an unhealthy
// cluster, a member that stopped (removed or shutting down) while it held
// the call, a proposal that raft dropped (during a leadership transfer),
// or a gRPC Unavailable or DeadlineExceeded status. Whether a write that
// failed so was applied is unknown.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		switch st := gs.GRPCStatus(); st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return true
		case codes.Unknown:
			return st.Message() == raftStopped || st.Message() == raftProposalDropped
		}
	}
	return false
}
