package etcderr

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Redial asks an etcd client's gRPC connection to reconnect at once to
// every endpoint it is waiting to reconnect to, and resets its reconnect
// backoff. It reports whether cli has a connection to ask (a
// *clientv3.Client has, through ActiveConnection); anything else is left
// alone.
//
// gRPC reconnects after a failed connection attempt with an exponential
// backoff (1s, growing 1.6 times up to 120s): after an etcd outage of 30s
// a client left alone may wait 15s more before it tries again, and every
// call waits with it. A component that needs etcd back now (a session
// whose renewals go unanswered, a node rejoining, a reader of the fleet
// whose watch waits for the connection) calls Redial at its own retry
// cadence, so that the connection is back within that cadence of etcd
// serving again. Redial sends nothing and costs a lock; a connection that
// is up is not disturbed.
func Redial(cli any) bool {
	conn := connOf(cli)
	if conn == nil {
		return false
	}
	conn.ResetConnectBackoff()
	return true
}

// WaitDown waits until an etcd client's gRPC connection is down (it is
// connecting, or failed its last attempt and waits to try again) and
// reports true then, at once if it is down already. It reports false when
// ctx ends first, when the client is closed, and at once for anything
// without a connection to watch (see Redial). While the connection is up
// or idle it waits on the connection's state changes; it sends nothing.
func WaitDown(ctx context.Context, cli any) bool {
	conn := connOf(cli)
	if conn == nil {
		return false
	}
	for {
		switch s := conn.GetState(); s {
		case connectivity.Connecting, connectivity.TransientFailure:
			return true
		case connectivity.Shutdown:
			return false
		default:
			if !conn.WaitForStateChange(ctx, s) {
				return false
			}
		}
	}
}

// connOf returns the gRPC connection of an etcd client; nil if cli has
// none.
func connOf(cli any) *grpc.ClientConn {
	c, ok := cli.(interface{ ActiveConnection() *grpc.ClientConn })
	if !ok {
		return nil
	}
	return c.ActiveConnection()
}
