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

// BalanceMove is one move of a BalancePassRecord.
type BalanceMove struct {
	Partition int     `json:"partition"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Load      float64 `json:"load"`
}

// BalancePassRecord is the value of the last pass key: a pass a balancer
// applied, with the configuration it planned it by.
type BalancePassRecord struct {
	// Rev is the revision of the snapshot the pass was computed from;
	// Term the epoch of the balancer's term; Time when it applied it (its
	// clock).
	Rev  int64     `json:"rev"`
	Term int64     `json:"term"`
	Time time.Time `json:"time"`
	// Moves are the partitions it moved; Removed the balancer's moves it
	// removed.
	Moves   []BalanceMove `json:"moves"`
	Removed []int         `json:"removed,omitempty"`
	// Before and After are the imbalance before the pass and as the pass
	// expected it after its moves.
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	// Upper, Lower, Budget and Cooldown are the balancer's configuration.
	Upper    float64       `json:"upper"`
	Lower    float64       `json:"lower"`
	Budget   float64       `json:"budget"`
	Cooldown time.Duration `json:"cooldown"`
}

// EncodeJSON returns the JSON of v, one of this file's values (which
// always encode: strings, numbers and times).
func EncodeJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
