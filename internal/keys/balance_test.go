package keys

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBalanceKeys: the balancer's keys live under the fleet's prefix; a
// suspension round-trips, and one that cannot be decoded still suspends,
// saying why.
func TestBalanceKeys(t *testing.T) {
	l := New("c")
	assert.Equal(t, "/tenure/c/balance/suspended", l.BalanceSuspended())
	assert.Equal(t, "/tenure/c/balance/pass", l.BalancePass())
	s := BalanceSuspend{Actor: "alice", Reason: "incident", Time: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)}
	assert.Equal(t, s, DecodeBalanceSuspend([]byte(EncodeJSON(s))))
	bad := DecodeBalanceSuspend([]byte("not json"))
	assert.True(t, strings.HasPrefix(bad.Reason, "undecodable suspension"), bad.Reason)
}
