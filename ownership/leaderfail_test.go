package ownership

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestEtcdLeaderFailure runs a fleet on 3 etcd members, each in its own
// process, with TTL 2s and default session settings. The etcd leader fails
// abruptly (SIGSTOP: no leadership transfer) for 1s, three times: no
// session ends and no partition changes epoch. Then etcd loses its quorum
// for longer than the sessions' documented outage bound: every partition
// moves to a new epoch, and no write under an old epoch is accepted.
func TestEtcdLeaderFailure(t *testing.T) {
	ecfg := cluster.DefaultConfig()
	ecfg.Members, ecfg.Processes = 3, true
	c := cluster.NewWithConfig(t, ecfg)
	store, err := etcdfence.New(c.NewClient(t), etcdfence.Config{Cluster: "leaderfail"})
	require.NoError(t, err)

	const parts = 64
	reg := prometheus.NewPedanticRegistry() // the nodes count their releases there
	released := func() float64 {
		sum := 0.0
		for _, r := range []string{"moved", "lost", "closed"} {
			for i := range 3 {
				sum += testsupport.MustMetric(t, reg, "tenure_partition_releases_total",
					map[string]string{"node": fmt.Sprintf("n%d", i), "reason": r})
			}
		}
		return sum
	}
	var nodes []*Node
	var bound time.Duration
	for i := range 3 {
		cfg := testConfig(t, "leaderfail", fmt.Sprintf("n%d", i), parts)
		cfg.Fencers = []fence.Fencer{store}
		cfg.Metrics = reg
		bound = cfg.Session.OutageBound()
		nodes = append(nodes, join(t, c.NewClient(t), cfg))
	}
	waitStable(t, 30*time.Second, nodes...)
	before := servedEpochs(t, nodes, parts)
	base := released() // the moves of the joins are over
	t.Logf("documented outage bound at TTL 2s: %v", bound)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 3 {
		leader, err := c.FreezeLeader(ctx)
		require.NoError(t, err)
		time.Sleep(time.Second) // the fault: the leader is silent for 1s
		require.NoError(t, c.ThawMember(leader))
		next, err := c.WaitLeader(ctx)
		require.NoError(t, err)
		t.Logf("failure %d: leader m%d frozen for 1s; leader now m%d", i+1, leader, next)
		// A session that missed its renewals ends within the bound of its
		// last acknowledged one; wait out one TTL so that any such end
		// would show.
		time.Sleep(2 * time.Second)
		require.Equal(t, base, released(), "a tenure ended during failure %d", i+1)
		assert.Equal(t, before, servedEpochs(t, nodes, parts), "epochs after failure %d", i+1)
	}

	// A failure longer than the bound: two of three members silent.
	leader, err := c.FreezeLeader(ctx)
	require.NoError(t, err)
	other := (leader + 1) % 3
	require.NoError(t, c.FreezeMember(other))
	time.Sleep(bound + time.Second)
	require.NoError(t, c.ThawMember(leader))
	require.NoError(t, c.ThawMember(other))
	waitStable(t, 60*time.Second, nodes...)
	after := servedEpochs(t, nodes, parts)
	assert.GreaterOrEqual(t, released()-base, float64(parts), "every tenure ended")
	accepted := 0
	for p, old := range before {
		require.Greater(t, after[p], old, "partition %d moved to a new epoch", p)
		_, err := store.Put(ctx, fence.Token{Scope: fence.PartitionScope(p), Epoch: old}, fmt.Sprintf("k/%d", p), []byte("stale"))
		if err == nil {
			accepted++
		} else {
			require.ErrorIs(t, err, fence.ErrStale, "partition %d", p)
		}
	}
	assert.Zero(t, accepted, "writes accepted under an old epoch")
}

// servedEpochs returns the epoch each partition is served under, from its
// owner's own view.
func servedEpochs(t testing.TB, nodes []*Node, parts int) map[int]int64 {
	t.Helper()
	out := make(map[int]int64, parts)
	for _, n := range nodes {
		for _, p := range n.Owned() {
			out[p] = n.LookupPartition(p).Epoch
		}
	}
	require.Len(t, out, parts, "every partition is served")
	return out
}
