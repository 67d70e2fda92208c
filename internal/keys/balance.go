package keys

import (
	"encoding/json"
	"time"
)

// BalanceSuspended returns the key of the balancer's suspension: while it
// exists, the fleet's balancer plans its passes but writes no move.
func (l Layout) BalanceSuspended() string { return l.prefix + "balance/suspended" }

// BalancePass returns the key of the record of the balancer's last applied
// pass, written in the pass's own transaction.
func (l Layout) BalancePass() string { return l.prefix + "balance/pass" }

// BalanceSuspend is the value of the suspension key: who suspended the
// balancer, why and when (the operator's clock).
type BalanceSuspend struct {
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// DecodeBalanceSuspend decodes the value of the suspension key. A value
// that cannot be decoded is a suspension whose Reason says so: the key
// stands, so the balancer stays suspended.
func DecodeBalanceSuspend(v []byte) BalanceSuspend {
	var s BalanceSuspend
	if err := json.Unmarshal(v, &s); err != nil {
		return BalanceSuspend{Reason: "undecodable suspension: " + err.Error()}
	}
	return s
}

// EncodeJSON returns the JSON of v, a value of the balancer's keys
// (BalanceSuspend, fleet.BalancerPass), which always encode: strings,
// numbers and times.
func EncodeJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
