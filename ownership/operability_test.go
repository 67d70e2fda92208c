package ownership_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestOperability scrapes the registries of two Nodes and their Routers
// (one registry: the node label tells them apart) and of the fenced store
// they write to, after a join, a planned move, an operator's forced
// release and a rejected stale write, and finds every count exact.
func TestOperability(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	storeReg := prometheus.NewPedanticRegistry()
	scfg := etcdfence.DefaultConfig()
	scfg.Cluster = "ops"
	scfg.Metrics = storeReg
	store, err := etcdfence.New(cli, scfg)
	require.NoError(t, err)

	reg := prometheus.NewPedanticRegistry()
	const P = 8
	join := func(id string) (*ownership.Node, *router.Router) {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Addr = "ops", id, id+".test:1"
		cfg.Ring.Partitions = P
		cfg.Session.TTL = 2 * time.Second
		cfg.Fencers = []fence.Fencer{store}
		cfg.Metrics = reg
		n, err := ownership.Join(ctx, c.NewClient(t), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		rt, err := router.New(n, router.Config{Metrics: reg})
		require.NoError(t, err)
		t.Cleanup(func() { rt.Close() })
		return n, rt
	}
	ready := func(nodes ...*ownership.Node) {
		t.Helper()
		for _, n := range nodes {
			for {
				changed := n.Changed() // before the check: a change after it closes this channel
				if n.Status().Ready {
					break
				}
				select {
				case <-changed:
				case <-ctx.Done():
					t.Fatalf("%s not ready: %v", n.ID(), n.Status())
				}
			}
		}
	}

	a, ra := join("a")
	ready(a)
	require.Len(t, a.Owned(), P)
	key := "k"
	require.NoError(t, ra.Do(ctx, key, func(ctx context.Context, tok fence.Token) error {
		_, err := store.Put(ctx, tok, key, []byte("1"))
		return err
	}))

	b, _ := join("b") // a planned move of b's share
	ready(a, b)
	moved := len(b.Owned())
	require.Positive(t, moved)

	// An operator force-releases one of a's partitions; a re-acquires it at
	// a higher epoch, and the old token is refused by the store.
	p := a.Owned()[0]
	old := a.LookupPartition(p)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: "ops"})
	require.NoError(t, err)
	_, err = op.ForceRelease(ctx, fence.PartitionScope(p), fleet.Action{Actor: "test", Reason: "operability test"})
	require.NoError(t, err)
	for {
		changed := a.Changed()
		r := a.LookupPartition(p)
		if r.Local && r.Epoch != old.Epoch {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("partition %d not re-acquired: %+v", p, r)
		}
	}
	_, err = store.Put(ctx, fence.Token{Scope: fence.PartitionScope(p), Epoch: old.Epoch}, key, []byte("stale"))
	require.ErrorIs(t, err, fence.ErrStale)

	na := map[string]string{"node": "a"}
	// a's handoffs end when it has the answers of its claims' deletions,
	// which change no snapshot of its own: wait for their count.
	testsupport.WaitMetric(t, reg, "tenure_partition_handoff_duration_seconds", na, float64(moved), 20*time.Second)
	// An acquisition is counted just after the snapshot that shows it
	// served is published: wait for the count of the re-acquisition.
	testsupport.WaitMetric(t, reg, "tenure_partition_acquisitions_total", na, float64(P+1), 20*time.Second)
	assert.Equal(t, float64(moved), testsupport.MustMetric(t, reg, "tenure_partition_acquisitions_total", map[string]string{"node": "b"}))
	assert.Equal(t, float64(moved), testsupport.MustMetric(t, reg, "tenure_partition_releases_total", map[string]string{"node": "a", "reason": "moved"}))
	assert.Equal(t, 1.0, testsupport.MustMetric(t, reg, "tenure_partition_releases_total", map[string]string{"node": "a", "reason": "lost"}))
	// Counted once etcd has said that a's lease lives.
	testsupport.WaitMetric(t, reg, "tenure_forced_releases_total", na, 1, 20*time.Second)
	assert.Equal(t, float64(P-moved), testsupport.MustMetric(t, reg, "tenure_partitions_owned", na))
	assert.Equal(t, float64(moved), testsupport.MustMetric(t, reg, "tenure_partition_handoff_duration_seconds", na), "one handoff per moved partition")
	assert.Equal(t, float64(P+1), testsupport.MustMetric(t, reg, "tenure_partition_unowned_duration_seconds", na))
	assert.Equal(t, 1.0, testsupport.MustMetric(t, reg, "tenure_router_requests_total", map[string]string{"node": "a", "result": "served"}))
	assert.Positive(t, testsupport.MustMetric(t, reg, "tenure_session_renewal_duration_seconds", na)+testsupport.MustMetric(t, reg, "tenure_session_opened_total", na))
	assert.Equal(t, 1.0, testsupport.MustMetric(t, reg, "tenure_session_opened_total", na))

	// Every acquisition advanced the store's floor; the Put was admitted and
	// the stale one refused.
	assert.Equal(t, float64(P+1+moved+1), testsupport.MustMetric(t, storeReg, "tenure_fence_admitted_total", nil))
	assert.Equal(t, 1.0, testsupport.MustMetric(t, storeReg, "tenure_fence_rejections_total", map[string]string{"scope_kind": "partition"}))
}
