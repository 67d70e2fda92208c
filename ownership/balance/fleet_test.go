package balance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestBalancerConvergesFleet: a fleet of four nodes, n3 of capacity
// weight 2, on real etcd, with load sent through a router.Client from
// outside the fleet and skewed onto n0's partitions (8 units a request
// where the others cost 1), counted by the nodes' own load meters. The
// balancer, elected and running its passes, moves partitions until every
// node's load per weight is within its band; each moved partition is
// served by its new owner at a higher epoch, and not one request fails at
// the caller. Converged, the weight-2 node carries twice the load of a
// weight-1 node within 10%. Then an operator's pin moves a partition,
// audited and counted as a pin; the time from the Pin call to the new
// owner serving is logged.
func TestBalancerConvergesFleet(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name, parts = "balance-fleet", 64
	ringCfg := ring.Config{Partitions: parts, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var nodes []*liveNode
	for i, w := range []int{1, 1, 1, 2} {
		nodes = append(nodes, startNode(t, ctx, cli, name, fmt.Sprintf("n%d", i), w, ringCfg))
	}
	require.NoError(t, fleettest.WaitFor(30*time.Second, func() error { return liveStable(nodes) }, liveChanges(nodes)...))
	view := nodes[0]
	epochs := make([]int64, parts)
	owners := make([]string, parts)
	for p := range parts {
		r := view.LookupPartition(p)
		epochs[p], owners[p] = r.Epoch, r.Owner
	}
	keys := keysOf(parts)
	cost := map[string]uint64{}
	for p, k := range keys {
		cost[k] = 1
		if owners[p] == "n0" {
			cost[k] = 8
		}
	}
	rc, err := router.NewClient(ctx, c.NewClient(t), router.ClientConfig{Cluster: name})
	require.NoError(t, err)
	defer rc.Close()
	l := startLoad(ctx, rc, keys, cost, 6)
	defer l.halt()

	reg := prometheus.NewRegistry()
	cfg := Config{Cluster: name, Upper: 1.04, Lower: 0.96, Budget: 0.05, Cooldown: time.Second, Interval: 100 * time.Millisecond, Metrics: reg}
	e := newCandidate(t, ctx, cli, name, "")
	b, err := NewBalancer(cli, cfg)
	require.NoError(t, err)
	rctx, stopRun := context.WithCancel(ctx)
	var ran sync.WaitGroup
	ran.Go(func() { _ = b.Run(rctx, e) })
	defer func() { stopRun(); ran.Wait() }()

	ticks := ticker(t, 50*time.Millisecond) // load reports change without a node's view changing
	start := time.Now()
	var last *Planned
	require.NoError(t, fleettest.WaitFor(150*time.Second, func() error {
		if err := liveStable(nodes); err != nil {
			return err
		}
		pl, err := b.Plan(ctx)
		if err != nil {
			return err
		}
		last = pl
		if pl.Before == 0 || pl.Before > cfg.Upper {
			return fmt.Errorf("imbalance %.3f, loads %v", pl.Before, pl.Loads)
		}
		return nil
	}, append(liveChanges(nodes), ticks)...))
	converged := time.Since(start)
	moved := 0
	for p := range parts {
		if r := view.LookupPartition(p); r.Owner != owners[p] {
			moved++
			assert.Greater(t, r.Epoch, epochs[p], "partition %d moved from %s to %s at a new epoch", p, owners[p], r.Owner)
		}
	}
	assert.Positive(t, moved)
	// Within the band, the weight-2 node's load is twice the mean of the
	// weight-1 nodes' within 10%.
	w1 := (last.Loads["n0"] + last.Loads["n1"] + last.Loads["n2"]) / 3
	ratio := last.Loads["n3"] / w1
	assert.InDelta(t, 2.0, ratio, 0.2, "weight-2 load %.1f over weight-1 mean %.1f", last.Loads["n3"], w1)
	t.Logf("converged in %v to imbalance %.3f (band %.2f) after %v balance moves, %d partitions on a new owner; weight-2/weight-1 load %.3f; loads %v",
		converged.Round(time.Millisecond), last.Before, cfg.Upper, testutil.ToFloat64(b.metrics.movesC.WithLabelValues("balance")), moved, ratio, last.Loads)

	// A pin: the partition moves to the pinned node, which serves it at a
	// new epoch; the Pin call is audited, and the balancer counts the move.
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	p := view.Ring().Owned("n0")[0]
	before := view.LookupPartition(p).Epoch
	pinStart := time.Now()
	rec, err := op.Pin(ctx, p, "n1", fleet.Action{Actor: "test", Reason: "pin under load"})
	require.NoError(t, err)
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error {
		if r := nodes[1].LookupPartition(p); !r.Local || r.Epoch <= before {
			return fmt.Errorf("partition %d not served by n1 yet: %+v", p, r)
		}
		return nil
	}, nodes[1].Changed))
	pinTook := time.Since(pinStart)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://fleet/k/"+keys[p], http.NoBody)
	require.NoError(t, err)
	resp, err := rc.Do(ctx, keys[p], req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "n1", string(body), "the pinned partition's key is served by n1")
	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	assert.Equal(t, rec.ID, recs[len(recs)-1].ID)
	assert.Equal(t, "pin", recs[len(recs)-1].Action)
	_, err = b.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(b.metrics.movesC.WithLabelValues("pin")))
	t.Logf("pin of partition %d to n1: served by n1 at epoch %d %v after the Pin call (go test -run TestBalancerConvergesFleet -v ./ownership/balance/)",
		p, nodes[1].LookupPartition(p).Epoch, pinTook.Round(time.Microsecond))

	n, failures := l.halt()
	assert.Empty(t, failures, "requests that failed at the caller")
	t.Logf("%d requests answered through the router.Client, %d failed", n, len(failures))
}
