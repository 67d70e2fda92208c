package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
)

// TestPlacementOrigins: the public origins of a placement are the values
// placement keys record.
func TestPlacementOrigins(t *testing.T) {
	assert.Equal(t, keys.OriginPin, actionPin)
	assert.Equal(t, keys.OriginBalance, placementMove)
}

// TestBalancerPassRecord: the record of the balance/pass key, as the
// balancer writes it, reads back as the BalancerPass that Operator reports
// (Snapshot from its "rev", Revision from the key's ModRevision).
func TestBalancerPassRecord(t *testing.T) {
	const record = `{"rev":41,"term":7,"time":"2026-01-02T03:04:05Z",` +
		`"moves":[{"partition":3,"from":"a","to":"b","load":1.5}],"removed":[4],` +
		`"before":0.3,"after":0.1,"upper":1.1,"lower":0.9,"budget":0.01,"cooldown":60000000000}`
	var r keys.BalancePassRecord
	require.NoError(t, json.Unmarshal([]byte(record), &r))
	assert.JSONEq(t, record, keys.EncodeJSON(r))
	want := &BalancerPass{Revision: 50, Snapshot: 41, Term: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Moves: []BalancerMove{{Partition: 3, From: "a", To: "b", Load: 1.5}}, Removed: []int{4},
		Before: 0.3, After: 0.1, Upper: 1.1, Lower: 0.9, Budget: 0.01, Cooldown: Seconds(time.Minute)}
	assert.Equal(t, want, passOf(r, 50))
}
