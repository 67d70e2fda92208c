package etcderr

import "google.golang.org/grpc"

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
// whose renewals go unanswered, a node rejoining) calls Redial at its own
// retry cadence, so that the connection is back within that cadence of
// etcd serving again. Redial sends nothing and costs a lock; a connection
// that is up is not disturbed.
func Redial(cli any) bool {
	c, ok := cli.(interface{ ActiveConnection() *grpc.ClientConn })
	if !ok {
		return false
	}
	conn := c.ActiveConnection()
	if conn == nil {
		return false
	}
	conn.ResetConnectBackoff()
	return true
}
