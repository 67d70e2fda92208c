package fleet

import (
	"encoding/json"
	"math"
	"time"
)

// This file holds the JSON forms of the reports that carry durations: a
// duration is a number of seconds under a key that ends in _seconds, as
// every report of the package (and tenurectl's --json) gives it.

// seconds returns s seconds as a Duration: 0 for a value that is not
// positive (NaN included), the longest Duration for one beyond it.
func seconds(s float64) time.Duration {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// memberStatusFields is MemberStatus without its JSON methods.
type memberStatusFields MemberStatus

// memberStatusJSON is MemberStatus's JSON form.
type memberStatusJSON struct {
	memberStatusFields
	// TTLLeftSeconds is TTLLeft in seconds, -1 if unknown.
	TTLLeftSeconds float64 `json:"ttl_left_seconds"`
}

// MarshalJSON encodes m with TTLLeft in seconds (ttl_left_seconds, -1 if
// unknown).
func (m MemberStatus) MarshalJSON() ([]byte, error) {
	ttl := m.TTLLeft.Seconds()
	if m.TTLLeft < 0 {
		ttl = -1
	}
	return json.Marshal(memberStatusJSON{memberStatusFields(m), ttl})
}

// UnmarshalJSON decodes MarshalJSON's form.
func (m *MemberStatus) UnmarshalJSON(b []byte) error {
	var v memberStatusJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = MemberStatus(v.memberStatusFields)
	m.TTLLeft = seconds(v.TTLLeftSeconds)
	if v.TTLLeftSeconds < 0 {
		m.TTLLeft = -1
	}
	return nil
}

// memberPlacementFields is MemberPlacement without its JSON methods.
type memberPlacementFields MemberPlacement

// memberPlacementJSON is MemberPlacement's JSON form.
type memberPlacementJSON struct {
	memberPlacementFields
	LoadWindowSeconds float64 `json:"load_window_seconds"`
}

// MarshalJSON encodes m with LoadWindow in seconds (load_window_seconds).
func (m MemberPlacement) MarshalJSON() ([]byte, error) {
	return json.Marshal(memberPlacementJSON{memberPlacementFields(m), m.LoadWindow.Seconds()})
}

// UnmarshalJSON decodes MarshalJSON's form.
func (m *MemberPlacement) UnmarshalJSON(b []byte) error {
	var v memberPlacementJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = MemberPlacement(v.memberPlacementFields)
	m.LoadWindow = seconds(v.LoadWindowSeconds)
	return nil
}

// balancerPassFields is BalancerPass without its JSON methods.
type balancerPassFields BalancerPass

// balancerPassJSON is BalancerPass's JSON form.
type balancerPassJSON struct {
	balancerPassFields
	CooldownSeconds float64 `json:"cooldown_seconds"`
}

// MarshalJSON encodes p with Cooldown in seconds (cooldown_seconds).
func (p BalancerPass) MarshalJSON() ([]byte, error) {
	return json.Marshal(balancerPassJSON{balancerPassFields(p), p.Cooldown.Seconds()})
}

// UnmarshalJSON decodes MarshalJSON's form.
func (p *BalancerPass) UnmarshalJSON(b []byte) error {
	var v balancerPassJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = BalancerPass(v.balancerPassFields)
	p.Cooldown = seconds(v.CooldownSeconds)
	return nil
}
