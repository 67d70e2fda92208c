package etcdops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/sim/cluster"
)

// operate runs op on each member of order in turn under the fleet's load
// and checks that it cost nothing: no session ends, no partition is lost
// or changes epoch, no request fails, and PostgreSQL holds every
// acknowledged write once and none below its scope's floor. It logs the
// latency of the requests during each operation beside the steady state
// before.
func operate(t *testing.T, f *fleet, what string, order []int, op func(i int) error) {
	t.Helper()
	l := f.startLoad(8)
	steady := l.steady(2 * time.Second)
	before := f.epochs()
	tenures, sessions := f.ended()
	windows := []window{steady}
	for _, i := range order {
		from := time.Now()
		require.NoError(t, op(i), "%s member %d", what, i)
		windows = append(windows, l.window(fmt.Sprintf("%s m%d %v", what, i, time.Since(from).Round(time.Millisecond)), from, time.Now()))
		after := l.steady(f.ttl) // a session that missed its renewals would end by now
		after.name = fmt.Sprintf("after m%d", i)
		windows = append(windows, after)
	}
	l.end()
	o := f.measure(l, before, tenures, sessions, windows)
	o.log(t)
	f.checkWrites(l)
	assert.Zero(t, o.sessions, "sessions ended")
	assert.Zero(t, o.tenures["lost"], "partitions lost")
	assert.Zero(t, o.epochsChanged, "partitions whose epoch changed")
	assert.Zero(t, o.failed, "requests failed: %v", o.firstErr)
}

// followersFirst returns the members with etcd's leader last.
func followersFirst(ctx context.Context, t *testing.T, etcd *cluster.Cluster) []int {
	t.Helper()
	leader, err := etcd.WaitLeader(ctx)
	require.NoError(t, err)
	return []int{(leader + 1) % 3, (leader + 2) % 3, leader}
}

// TestReplaceMemberUnderLoad replaces a follower and then the leader of a
// three-member etcd, each removed through the client API (etcdctl member
// remove) and a new member with an empty data directory added (etcdctl
// member add) and started at its address with --initial-cluster-state
// existing, under keyed load with fenced writes to etcd and PostgreSQL.
func TestReplaceMemberUnderLoad(t *testing.T) {
	ecfg := cluster.DefaultConfig()
	ecfg.Members, ecfg.Processes = 3, true
	etcd := cluster.NewWithConfig(t, ecfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := startFleet(t, etcd, fleetConfig{name: "replace", parts: 32, ttl: 2 * time.Second})
	order := followersFirst(ctx, t, etcd)
	operate(t, f, "replace", []int{order[0], order[2]}, func(i int) error {
		_, err := etcd.ReplaceMember(ctx, i)
		return err
	})
	list, err := etcd.NewClient(t).MemberList(ctx)
	require.NoError(t, err)
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	t.Logf("members after: %s", strings.Join(names, ","))
}

// TestUpgradeEtcdUnderLoad starts three members of etcd's previous minor
// release (cluster.PreviousEtcd, built from its Go module) and moves them
// one at a time, followers first, to the current one (tenure's go.mod):
// a graceful stop, the new binary, a start on the same data directory,
// under keyed load with fenced writes to etcd and PostgreSQL.
func TestUpgradeEtcdUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd's previous release")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prev, err := cluster.PreviousMemberBinary(ctx)
	require.NoError(t, err)
	ecfg := cluster.DefaultConfig()
	ecfg.Members, ecfg.Processes, ecfg.MemberBinary = 3, true, prev
	etcd := cluster.NewWithConfig(t, ecfg)
	t.Logf("versions before: %v", versions(ctx, t, etcd))
	f := startFleet(t, etcd, fleetConfig{name: "upgrade", parts: 32, ttl: 2 * time.Second})
	operate(t, f, "upgrade", followersFirst(ctx, t, etcd), func(i int) error {
		if err := etcd.StopMember(i); err != nil {
			return err
		}
		if err := etcd.SetMemberBinary(ctx, i, ""); err != nil {
			return err
		}
		return etcd.RestartMember(ctx, i)
	})
	vs := versions(ctx, t, etcd)
	t.Logf("versions after: %v", vs)
	for i, v := range vs {
		assert.NotEqual(t, strings.TrimPrefix(cluster.PreviousEtcd, "v"), v, "member %d", i)
	}
}

// versions returns each member's etcd version as it reports it.
func versions(ctx context.Context, t *testing.T, etcd *cluster.Cluster) []string {
	t.Helper()
	out := make([]string, etcd.Size())
	for i, ep := range etcd.Endpoints() {
		mcli, err := etcd.MemberClient(i)
		require.NoError(t, err)
		st, err := mcli.Status(ctx, ep)
		require.NoError(t, err)
		out[i] = st.Version
	}
	return out
}
