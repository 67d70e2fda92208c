package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestOperatorPlacementReport: the report gives each member its weight
// (as the ring uses it), its partitions by the fleet's rule, and the load
// of those partitions, each as its owner reports it or, where the owner
// reports none, as another node does (a partition that just moved); the
// imbalances are max over mean per unit of weight; an undecodable report
// counts as none.
func TestOperatorPlacementReport(t *testing.T) {
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const name = "report"
	l := keys.New(name)
	cfg := ring.Config{Partitions: 32, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	require.NoError(t, createSpec(ctx, cli, l, cfg.Spec()))
	weights := map[string]int{"a": 1, "b": 2, "c": 1}
	for id, w := range weights {
		v, err := keys.EncodeMember(keys.Member{ID: id, Weight: w})
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Member(id), v)
		require.NoError(t, err)
	}
	r, err := ring.NewWeighted([]ring.Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 1}}, cfg)
	require.NoError(t, err)
	pa, pb := r.Owned("a"), r.Owned("b")
	for id, v := range map[string]string{
		// a still reports b's pb[0] (b's own report wins) and pb[1] (b
		// reports none: a's counts, for b).
		"a": keys.EncodeLoadReport(keys.LoadReport{Window: 60, Partitions: []int{pa[0], pa[1], pb[0], pb[1]}, Loads: []float64{10, 20, 99, 7}}),
		"b": keys.EncodeLoadReport(keys.LoadReport{Window: 60, Partitions: []int{pb[0]}, Loads: []float64{30}}),
		"c": `{"p":[1],"l":[]}`,
	} {
		_, err := cli.Put(ctx, l.Load(id), v)
		require.NoError(t, err)
	}
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	rep, err := op.Placement(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Members, 3)
	assert.Equal(t, ring.AlgorithmWeighted, rep.Algorithm)
	byID := map[string]fleet.MemberPlacement{}
	total := 0
	for _, m := range rep.Members {
		byID[m.ID] = m
		total += m.Partitions
	}
	assert.Equal(t, 32, total)
	assert.Equal(t, 2, byID["b"].Weight)
	assert.Equal(t, 30.0, byID["a"].Load)
	assert.Equal(t, 37.0, byID["b"].Load)
	assert.Equal(t, 18.5, byID["b"].LoadPerWeight)
	assert.Zero(t, byID["c"].Load)
	assert.InDelta(t, 30/(67.0/4), rep.LoadImbalance, 1e-9)
	assert.Equal(t, fleet.BalancerState{}, rep.Balancer, "no suspension, no pass")
	top := 0.0
	for _, m := range rep.Members {
		top = max(top, m.PerWeight)
	}
	assert.InDelta(t, top/(32.0/4), rep.Imbalance, 1e-9)
}

// TestOperatorSuspendBalancer: suspending and resuming the balancer need
// an actor and a reason, are stored in etcd with their audit record in one
// transaction, and show in the placement report; resuming a balancer that
// is not suspended is refused.
func TestOperatorSuspendBalancer(t *testing.T) {
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const name = "suspend"
	l := keys.New(name)
	require.NoError(t, createSpec(ctx, cli, l, ring.Config{Partitions: 8, LoadFactor: 1.25}.Spec()))
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	_, err = op.SuspendBalancer(ctx, fleet.Action{Actor: "alice"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	_, err = op.SuspendBalancer(ctx, fleet.Action{Reason: "incident"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	_, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "alice", Reason: "over"})
	require.ErrorIs(t, err, fleet.ErrNotFound)

	rec, err := op.SuspendBalancer(ctx, fleet.Action{Actor: "alice", Reason: "incident 42"})
	require.NoError(t, err)
	assert.Equal(t, "balance-suspend", rec.Action)
	assert.Equal(t, "balancer", rec.Target)
	rep, err := op.Placement(ctx)
	require.NoError(t, err)
	st := rep.Balancer
	require.NotNil(t, st.Suspended)
	assert.Equal(t, "alice", st.Suspended.Actor)
	assert.Equal(t, "incident 42", st.Suspended.Reason)
	assert.True(t, st.Suspended.Time.Equal(rec.Time))

	_, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "bob"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	rec, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "bob", Reason: "incident over"})
	require.NoError(t, err)
	assert.Equal(t, "balance-resume", rec.Action)
	rep, err = op.Placement(ctx)
	require.NoError(t, err)
	assert.Nil(t, rep.Balancer.Suspended)

	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 2, "the refused actions left no record")
	assert.Equal(t, []string{"balance-suspend", "balance-resume"}, []string{recs[0].Action, recs[1].Action})
	assert.Equal(t, "incident over", recs[1].Reason)
	assert.Equal(t, "bob", recs[1].Actor)
}
