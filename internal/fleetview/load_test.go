package fleetview

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// TestPartitionLoads: a partition's load is its owner's report of it;
// without one, the largest other node's report (whatever the order the
// reports come in); partitions outside [0, P) are ignored; a member's
// load is the sum over the partitions it owns.
func TestPartitionLoads(t *testing.T) {
	r, err := ring.New([]string{"a", "b", "c"}, ring.Config{Partitions: 8, LoadFactor: 1.25})
	require.NoError(t, err)
	pa, pb := r.Owned("a")[0], r.Owned("b")[0]
	reports := map[string]keys.LoadReport{
		"a": {Partitions: []int{pa, pb, 99}, Loads: []float64{5, 40, 1000}},
		"b": {Partitions: []int{pa}, Loads: []float64{7}},
		"c": {Partitions: []int{pa}, Loads: []float64{9}},
	}
	for range 20 { // map order varies
		loads := PartitionLoads(r, reports)
		assert.Equal(t, 5.0, loads[pa], "the owner's report")
		assert.Equal(t, 40.0, loads[pb], "the owner reports none: another's")
		m := MemberLoads(r, loads)
		assert.Equal(t, map[string]float64{"a": 5, "b": 40, "c": 0}, m)
	}
	reports["a"] = keys.LoadReport{}
	reports["c"] = keys.LoadReport{Partitions: []int{pa}, Loads: []float64{9}}
	for range 20 {
		assert.Equal(t, 9.0, PartitionLoads(r, reports)[pa], "the largest of the others")
	}
}
