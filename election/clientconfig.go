package election

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// minKeepAliveTime is the shortest keepalive ping interval gRPC's client
// allows: a shorter DialKeepAliveTime is raised to it, with a warning.
const minKeepAliveTime = 10 * time.Second

// ClientConfig returns the settings of an etcd client (clientv3.New) for a
// process whose sessions use c (defaults applied), over endpoints: every
// member's client URL. Set Logger, TLS, Username and Password on the
// result as the deployment needs; keep the rest.
//
// What keeps a node's session and partitions while one member is blocked
// (defragmenting, paused, partitioned) is every member in Endpoints: the
// client spreads requests over all of them (gRPC's round-robin balancer),
// and a session sends a new renewal attempt every 100ms while one is due,
// each on a new stream and bounded by 1s, so a member that does not answer
// holds only the attempts sent to it, and the others are answered within
// OutageBound. The fleet's own requests are bounded by the TTL and tried
// again. What the settings add:
//
//   - DialKeepAliveTime = max(10s, TTL/2) and DialKeepAliveTimeout =
//     max(1s, OutageBound/2), to the millisecond: the client pings a
//     member's connection once the member has sent nothing for that long,
//     and closes it when the ping goes unanswered, so that the watches it
//     carries (the fleet's view of members and claims) and the requests
//     in flight on a member that stopped answering (SIGSTOP, a frozen VM,
//     a dead host that sends no reset) move to another member instead of
//     waiting for an answer that never comes. 10s is gRPC's floor for the
//     interval, so until then the balancer still sends a share of new
//     requests (one in three, of three members) to the silent member,
//     where each waits for its own deadline. A defragmenting member still
//     answers pings: the requests sent to it wait until it is done.
//   - DialTimeout = TTL: how long clientv3.New waits for a first
//     connection.
//
// PermitWithoutStream stays off: etcd's server refuses pings on a
// connection without streams (its --grpc-keepalive-min-time policy), and a
// node always has watches open. AutoSyncInterval stays off too: it would
// replace Endpoints with the URLs that members advertise, which proxies
// and address translation may make unreachable; where a replaced member
// comes back at a new address, update the endpoints (or set it).
func (c SessionConfig) ClientConfig(endpoints []string) clientv3.Config {
	d := c.withDefaults()
	bound := c.OutageBound()
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          d.TTL,
		DialKeepAliveTime:    max(minKeepAliveTime, d.TTL/2),
		DialKeepAliveTimeout: max(time.Second, (bound / 2).Round(time.Millisecond)),
	}
}
