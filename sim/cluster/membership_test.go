//go:build unix

package cluster_test

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

// memberVersions returns each member's etcd server version as it reports
// it (Status), and requires that a key written through the whole cluster
// reads back from every member alone.
func memberVersions(t *testing.T, c *cluster.Cluster, key string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.NewClient(t).Put(ctx, key, "v")
	require.NoError(t, err)
	var out []string
	for i := range c.Size() {
		cli, err := c.MemberClient(i)
		require.NoError(t, err)
		st, err := cli.Status(ctx, c.Endpoints()[i])
		require.NoError(t, err, "member %d", i)
		out = append(out, st.Version)
		resp, err := cli.Get(ctx, key) // linearizable: the member is part of the quorum
		require.NoError(t, err, "member %d", i)
		require.Len(t, resp.Kvs, 1, "member %d", i)
	}
	return out
}

// TestReplaceMember: each member of three in turn is removed through the
// client API and a new one with an empty data directory takes its place
// and its address; the cluster keeps one leader and every member serves
// what was written before.
func TestReplaceMember(t *testing.T) {
	c, pids := processCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := c.NewClient(t)
	before, err := cli.MemberList(ctx)
	require.NoError(t, err)
	for i := range 3 {
		id, err := c.ReplaceMember(ctx, i)
		require.NoError(t, err, "replace member %d", i)
		pids.add(t, c, i)
		list, err := cli.MemberList(ctx)
		require.NoError(t, err)
		require.Len(t, list.Members, 3)
		var names []string
		for _, m := range list.Members {
			names = append(names, m.Name)
		}
		assert.Contains(t, names, fmt.Sprintf("m%dr1", i))
		t.Logf("member %d replaced by %x; members %s", i, id, strings.Join(names, ","))
		memberVersions(t, c, fmt.Sprintf("k%d", i))
		_, err = c.WaitLeader(ctx)
		require.NoError(t, err)
	}
	list, err := cli.MemberList(ctx)
	require.NoError(t, err)
	for _, m := range list.Members {
		for _, old := range before.Members {
			assert.NotEqual(t, old.ID, m.ID, "member %s", m.Name)
		}
	}
	_, err = c.ReplaceMember(ctx, 3)
	require.ErrorIs(t, err, cluster.ErrNoMember)
}

// TestUpgradeFromPreviousEtcd: three members of etcd's previous minor
// release are moved one at a time to the current one (a graceful stop, the
// other binary, a restart on the same data directory); each step keeps
// the data and a leader.
func TestUpgradeFromPreviousEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd's previous release")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	prev, err := cluster.PreviousMemberBinary(ctx)
	require.NoError(t, err)
	t.Logf("etcdmember against etcd %s in %v", cluster.PreviousEtcd, time.Since(start).Round(time.Millisecond))
	cfg := cluster.DefaultConfig()
	cfg.Members, cfg.Processes, cfg.MemberBinary = 3, true, prev
	c := cluster.NewWithConfig(t, cfg)
	old := strings.TrimPrefix(cluster.PreviousEtcd, "v")
	assert.Equal(t, []string{old, old, old}, memberVersions(t, c, "k"))
	for i := range 3 {
		require.NoError(t, c.StopMember(i))
		require.NoError(t, c.SetMemberBinary(ctx, i, ""))
		require.NoError(t, c.RestartMember(ctx, i))
		vs := memberVersions(t, c, fmt.Sprintf("k%d", i))
		t.Logf("member %d upgraded: versions %v", i, vs)
		assert.NotEqual(t, old, vs[i])
	}
}

// TestMoveLeader: leadership moves to each follower in turn on request,
// and a request for a member that is not running is refused with its
// state.
func TestMoveLeader(t *testing.T) {
	c, _ := processCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		lead, err := c.WaitLeader(ctx)
		require.NoError(t, err)
		to := (lead + 1) % 3
		require.NoError(t, c.MoveLeader(ctx, to))
		now, err := c.WaitLeader(ctx)
		require.NoError(t, err)
		assert.Equal(t, to, now)
	}
	lead, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	require.NoError(t, c.MoveLeader(ctx, lead), "the leader already leads")
	stopped := (lead + 1) % 3
	require.NoError(t, c.StopMember(stopped))
	require.ErrorIs(t, c.MoveLeader(ctx, stopped), cluster.ErrMemberStopped)
	require.ErrorIs(t, c.MoveLeader(ctx, 3), cluster.ErrNoMember)
}
