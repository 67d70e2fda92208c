package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeSplitAndMerge: a fleet of 8 partitions split to 32 and merged
// back to 8 while it serves: each resize completes, the nodes settle on
// the new count, and the nodes, an Observer and the Operator name the
// same partition and owner for every sampled key.
func TestResizeSplitAndMerge(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "resize"
	a := join(t, cli, testConfig(t, name, "a", 8))
	b := join(t, cli, testConfig(t, name, "b", 8))
	nodes := []*ownership.Node{a, b}
	waitStable(t, 20*time.Second, nodes...)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	ctx := opCtx(t)
	obs, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ring.Config{Partitions: 8, LoadFactor: 1.25}})
	require.NoError(t, err)
	t.Cleanup(obs.Close)

	dry, err := op.Resize(ctx, 32, fleet.ResizeOptions{Actor: "t", Reason: "dry", Budget: 3, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, fleet.ResizeReport{From: 8, To: 32, Budget: 3, Groups: 8, Moves: 40, Steps: 3, DryRun: true, ID: dry.ID,
		Partitions: 8, Revision: dry.Revision, InProgress: false, By: "t", Reason: "dry", Started: dry.Started}, dry)

	for _, to := range []int{32, 8} {
		rep, err := op.Resize(ctx, to, fleet.ResizeOptions{Actor: "t", Reason: "grow", Budget: 3})
		require.NoError(t, err)
		require.True(t, rep.Completed)
		t.Logf("resize to %d: took %v, %d driver writes", to, time.Duration(float64(rep.Took)*float64(time.Second)), rep.Writes)
		require.NoError(t, waitFor(20*time.Second, func() error {
			if p := a.Ring().Partitions(); p != to {
				return fmt.Errorf("a uses %d partitions", p)
			}
			return stableErr(nodes)
		}, nodes...))
		st, err := op.ResizeStatus(ctx)
		require.NoError(t, err)
		require.False(t, st.InProgress)
		require.Equal(t, to, st.Partitions)
		require.NoError(t, waitFor(20*time.Second, func() error {
			for i := range 200 {
				key := fmt.Sprintf("key-%d", i)
				ra, rb, ro := a.Lookup(key), b.Lookup(key), obs.Lookup(key)
				if ra.Partition != ring.PartitionOf(key, to) || ra.Partition != rb.Partition || ra.Partition != ro.Partition {
					return fmt.Errorf("%s: partitions %d %d %d", key, ra.Partition, rb.Partition, ro.Partition)
				}
				if ra.Owner == "" || ra.Owner != rb.Owner || ra.Owner != ro.Owner || ra.Epoch != ro.Epoch {
					return fmt.Errorf("%s: owners %q %q %q", key, ra.Owner, rb.Owner, ro.Owner)
				}
			}
			return nil
		}, nodes...))
	}
}
