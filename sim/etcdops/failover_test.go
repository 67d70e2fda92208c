package etcdops

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestFrozenMemberFailover freezes (SIGSTOP) one member of three, the
// stand-in for a member blocked by defragmentation or a paused host, while
// the etcd client of every node holds its streams there: each node joined
// through a client whose only endpoint was that member (its lease, its
// watches and its first requests are there), and was then given every
// member (SetEndpoints; the configuration that election.SessionConfig's
// ClientConfig returns). The member, a follower (a leader frozen past the
// TTL is etcd's own case: see cluster.FreezeMember), stays frozen for
// three TTLs, far past the sessions' outage bound, under keyed load with
// fenced writes to etcd and PostgreSQL: no session ends, no partition is
// lost or changes epoch, no request fails.
func TestFrozenMemberFailover(t *testing.T) {
	ecfg := cluster.DefaultConfig()
	ecfg.Members, ecfg.Processes = 3, true
	etcd := cluster.NewWithConfig(t, ecfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, err := etcd.WaitLeader(ctx)
	require.NoError(t, err)
	pinned := (leader + 1) % 3
	const ttl = 2 * time.Second
	f := startFleet(t, etcd, fleetConfig{name: "frozen", parts: 32, ttl: ttl,
		client: func(_ int, sess election.SessionConfig) clientv3.Config {
			return sess.ClientConfig(etcd.Endpoints()[pinned : pinned+1])
		}})
	for _, cli := range f.clis {
		cli.SetEndpoints(etcd.Endpoints()...)
	}
	l := f.startLoad(8)
	steady := l.steady(2 * time.Second)
	before := f.epochs()
	tenures, sessions := f.ended()

	from := time.Now()
	require.NoError(t, etcd.FreezeMember(pinned))
	time.Sleep(3 * ttl) // the fault: the member answers nothing for 3 TTLs
	require.NoError(t, etcd.ThawMember(pinned))
	frozen := l.window("frozen", from, time.Now())
	after := l.steady(ttl) // a session that missed its renewals would end by now
	after.name = "after thaw"
	l.end()
	o := f.measure(l, before, tenures, sessions, []window{steady, frozen, after})
	o.log(t)
	f.checkWrites(l)
	assert.Zero(t, o.sessions, "sessions ended")
	assert.Zero(t, o.tenures["lost"], "partitions lost")
	assert.Zero(t, o.epochsChanged, "partitions whose epoch changed")
	assert.Zero(t, o.failed, "requests failed: %v", o.firstErr)
	assert.NotZero(t, frozen.n-frozen.failed, "requests served while the member was frozen")
}
