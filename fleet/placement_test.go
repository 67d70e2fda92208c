package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestOperatorPlacementReport: the report gives each member its weight
// (as the ring uses it), its partitions by the fleet's rule, and the load
// it reports; the imbalances are max over mean per unit of weight; an
// undecodable report counts as none.
func TestOperatorPlacementReport(t *testing.T) {
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const name = "report"
	l := keys.New(name)
	require.NoError(t, createSpec(ctx, cli, l, ring.Config{Partitions: 32, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}.Spec()))
	for id, w := range map[string]int{"a": 1, "b": 2, "c": 1} {
		v, err := keys.EncodeMember(keys.Member{ID: id, Weight: w})
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Member(id), v)
		require.NoError(t, err)
	}
	for id, v := range map[string]string{
		"a": keys.EncodeLoadReport(keys.LoadReport{Window: 60, Partitions: []int{1, 2}, Loads: []float64{10, 20}}),
		"b": keys.EncodeLoadReport(keys.LoadReport{Window: 60, Partitions: []int{3}, Loads: []float64{30}}),
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
	assert.Equal(t, 15.0, byID["b"].LoadPerWeight)
	assert.Zero(t, byID["c"].Load)
	assert.InDelta(t, 30/(60.0/4), rep.LoadImbalance, 1e-9)
	top := 0.0
	for _, m := range rep.Members {
		top = max(top, m.PerWeight)
	}
	assert.InDelta(t, top/(32.0/4), rep.Imbalance, 1e-9)
}
