package balance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestMovesByCause: the balancer counts the partitions whose owner
// changed between its snapshots by cause, against the real events: an
// operator's pin and unpin (one partition each, which the nodes move) and
// a member leaving (every partition whose owner the nodes' ring changed);
// the leaver's load series is deleted.
func TestMovesByCause(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name, parts = "balance-causes", 16
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var nodes []*ownership.Node
	for i := range 3 {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID = name, fmt.Sprintf("n%d", i)
		cfg.Addr = cfg.NodeID + ".test:7000"
		cfg.Ring = ring.Config{Partitions: parts, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
		cfg.Session.TTL = 2 * time.Second
		n, err := ownership.Join(ctx, cli, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		nodes = append(nodes, n)
	}
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error { return fleettest.StableErr(nodes) }, fleettest.Changes(nodes...)...))
	reg := prometheus.NewRegistry()
	b, err := NewBalancer(cli, Config{Cluster: name, Metrics: reg})
	require.NoError(t, err)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	moves := func(cause string) float64 { return testutil.ToFloat64(b.metrics.movesC.WithLabelValues(cause)) }
	plan := func() {
		t.Helper()
		_, err := b.Plan(ctx)
		require.NoError(t, err)
	}
	plan()
	assert.Equal(t, 3, testutil.CollectAndCount(b.metrics.memberLoadG), "a load series per member")

	// A pin: one partition moves, which the nodes carry out at a new epoch.
	p := nodes[0].Ring().Owned("n0")[0]
	before := nodes[0].LookupPartition(p).Epoch
	_, err = op.Pin(ctx, p, "n1", fleet.Action{Actor: "test", Reason: "cause"})
	require.NoError(t, err)
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error {
		if r := nodes[1].LookupPartition(p); !r.Local || r.Epoch <= before {
			return fmt.Errorf("partition %d not on n1 yet: %+v", p, r)
		}
		return nil
	}, fleettest.Changes(nodes...)...))
	plan()
	assert.Equal(t, 1.0, moves("pin"))
	pinned := nodes[1].LookupPartition(p).Epoch
	_, err = op.Unpin(ctx, p, fleet.Action{Actor: "test", Reason: "cause"})
	require.NoError(t, err)
	// Stable is not enough: a fleet that has not seen the unpin yet is
	// stable too. Wait for the partition back on n0, at a new epoch.
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error {
		if r := nodes[0].LookupPartition(p); !r.Local || r.Epoch <= pinned {
			return fmt.Errorf("partition %d not back on n0 yet: %+v", p, r)
		}
		return fleettest.StableErr(nodes)
	}, fleettest.Changes(nodes...)...))
	plan()
	assert.Equal(t, 2.0, moves("pin"), "the unpin moved it back")
	assert.Zero(t, moves("membership"))

	// A member leaves: every partition whose owner the ring changed.
	old := nodes[0].Ring()
	require.NoError(t, nodes[2].Close(ctx))
	rest := nodes[:2]
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error { return fleettest.StableErr(rest) }, fleettest.Changes(rest...)...))
	now := nodes[0].Ring()
	require.Len(t, now.Members(), 2)
	changed := 0
	for q := range parts {
		a, _ := old.Owner(q)
		b, _ := now.Owner(q)
		if a != b {
			changed++
		}
	}
	require.Positive(t, changed)
	plan()
	assert.Equal(t, float64(changed), moves("membership"))
	assert.Equal(t, 2.0, moves("pin"))
	assert.Zero(t, moves("balance"))
	assert.Equal(t, 2, testutil.CollectAndCount(b.metrics.memberLoadG), "the leaver's load series is deleted")
	t.Logf("moves by cause: pin %v, membership %v (a leave moved %d of %d partitions)", moves("pin"), moves("membership"), changed, parts)
}
