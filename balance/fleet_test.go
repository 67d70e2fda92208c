package balance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleettest"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestBalancerConvergesFleet: a fleet of four nodes whose load is skewed
// onto one node's partitions, counted by the nodes' own load meters; the
// balancer, elected and running its passes, moves partitions until every
// node's load per weight is within the band, and each moved partition is
// served by its new owner at a higher epoch.
func TestBalancerConvergesFleet(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name, parts = "balance-fleet", 32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var nodes []*ownership.Node
	for i := range 4 {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID = name, fmt.Sprintf("n%d", i)
		cfg.Addr = cfg.NodeID + ".test:7000"
		cfg.Ring = ring.Config{Partitions: parts, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
		cfg.Session.TTL = 2 * time.Second
		cfg.LoadInterval, cfg.LoadWindow, cfg.LoadBudget = 20*time.Millisecond, 100*time.Millisecond, 1000
		n, err := ownership.Join(ctx, cli, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		nodes = append(nodes, n)
	}
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error { return fleettest.StableErr(nodes) }, fleettest.Changes(nodes...)...))
	hot := nodes[0].Ring().Owned("n0")
	before := map[int]int64{}
	for _, p := range hot {
		before[p] = nodes[0].LookupPartition(p).Epoch
	}

	// Load: every partition 1 unit a round, n0's partitions 8.
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }()
	wg.Go(func() {
		cost := map[int]uint64{}
		for _, p := range hot {
			cost[p] = 7
		}
		for lctx.Err() == nil {
			for p := range parts {
				owner := nodes[0].LookupPartition(p).Owner
				for _, n := range nodes {
					if n.ID() == owner {
						_ = n.AddPartitionLoad(p, 1+cost[p])
					}
				}
			}
			time.Sleep(time.Millisecond)
		}
	})

	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = sess.Close(context.Background()) }()
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "balancer"})
	require.NoError(t, err)
	defer func() { _ = e.Close(context.Background()) }()
	b, err := NewBalancer(cli, Config{Cluster: name, Interval: 100 * time.Millisecond, Cooldown: 500 * time.Millisecond, Budget: 0.1})
	require.NoError(t, err)
	rctx, stopRun := context.WithCancel(ctx)
	var ran sync.WaitGroup
	ran.Go(func() { _ = b.Run(rctx, e) })
	defer func() { stopRun(); ran.Wait() }()

	tick := time.NewTicker(50 * time.Millisecond) // load reports change without a node's view changing
	defer tick.Stop()
	ticks := func() <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			select {
			case <-tick.C:
			case <-lctx.Done():
			}
			close(ch)
		}()
		return ch
	}
	var last *Planned
	require.NoError(t, fleettest.WaitFor(45*time.Second, func() error {
		if err := fleettest.StableErr(nodes); err != nil {
			return err
		}
		pl, err := b.Plan(ctx)
		if err != nil {
			return err
		}
		last = pl
		if pl.Before == 0 || pl.Before > DefaultConfig().Upper {
			return fmt.Errorf("imbalance %.3f", pl.Before)
		}
		return nil
	}, append(fleettest.Changes(nodes...), ticks)...))
	moved := 0
	for _, p := range hot {
		r := nodes[0].LookupPartition(p)
		if r.Owner != "n0" {
			moved++
			assert.Greater(t, r.Epoch, before[p], "partition %d moved at a new epoch", p)
		}
	}
	assert.Positive(t, moved)
	t.Logf("converged to imbalance %.3f after moving %d of n0's %d partitions", last.Before, moved, len(hot))
}
