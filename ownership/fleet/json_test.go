package fleet_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// TestReportJSON: the reports give durations in seconds under keys that
// say so (a member's unknown TTL as -1), the ring algorithm by name, and
// decode back to the same Go values.
func TestReportJSON(t *testing.T) {
	roundTrip := func(v, back any, want ...string) {
		t.Helper()
		b, err := json.Marshal(v)
		require.NoError(t, err)
		for _, w := range want {
			assert.Contains(t, string(b), w)
		}
		require.NoError(t, json.Unmarshal(b, back))
	}
	for _, ttl := range []time.Duration{7 * time.Second, -1} {
		st := fleet.MemberStatus{ID: "n1", TTLLeft: fleet.Seconds(ttl)}
		var back fleet.MemberStatus
		want := `"ttl_left_seconds":7`
		if ttl < 0 {
			want = `"ttl_left_seconds":-1`
		}
		roundTrip(st, &back, want)
		assert.Equal(t, st, back)
	}
	pass := fleet.BalancerPass{Snapshot: 9, Cooldown: fleet.Seconds(90 * time.Second), Moves: []fleet.BalancerMove{}, Removed: []int{}}
	var pback fleet.BalancerPass
	roundTrip(pass, &pback, `"cooldown_seconds":90`, `"snapshot_revision":9`, `"removals":[]`)
	assert.Equal(t, pass, pback)
	m := fleet.MemberPlacement{ID: "n1", LoadWindow: fleet.Seconds(time.Minute)}
	var mback fleet.MemberPlacement
	roundTrip(m, &mback, `"load_window_seconds":60`, `"drained":false`)
	assert.Equal(t, m, mback)
	rep := fleet.PlacementReport{Algorithm: ring.AlgorithmBounded}
	var rback fleet.PlacementReport
	roundTrip(rep, &rback, `"ring_algorithm":"bounded"`)
	assert.Equal(t, rep, rback)
}
