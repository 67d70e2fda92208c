package fleet

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Status summarizes a fleet's health at one etcd revision. Its lists are
// never nil.
type Status struct {
	// Revision is the etcd revision the fleet was read at.
	Revision int64 `json:"revision"`
	// Spec is the fleet's spec.
	Spec ring.Spec `json:"spec"`
	// RingVersion is the Version of the ring of the members not drained.
	RingVersion uint64 `json:"ring_version"`
	// Members and Drained are the IDs of all members and of the drained
	// ones, sorted.
	Members []string `json:"member_ids"`
	Drained []string `json:"drained_ids"`
	// Unowned lists the partitions nobody claims. The fleet is settled,
	// every partition claimed by its ring owner, when Unowned and Handoffs
	// are empty.
	Unowned []int `json:"unowned"`
	// Handoffs lists the partitions claimed by a node other than the ring's
	// owner: moves in progress (or stuck).
	Handoffs []PartitionStatus `json:"handoffs"`
	// Owned counts the partitions each member holds, zero counts included.
	Owned map[string]int `json:"owned_by_member"`
	// Idle lists the members that hold no partition, sorted.
	Idle []string `json:"idle_ids"`
	// Alarms are the alarms that stand in etcd (etcdctl alarm list), read
	// after the fleet when the Operator's client can list them (see
	// NewOperator); empty otherwise. While NOSPACE stands, etcd refuses
	// puts: planned moves, operator actions and the balancer wait (see
	// ErrNoSpace).
	Alarms []EtcdAlarm `json:"alarms"`
	// Features are the fleet's effective protocol features: those every
	// member's build understands, sorted. Requires are the features the
	// spec records in use, which a build must understand to join.
	Features []string `json:"features"`
	Requires []string `json:"requires"`
	// Migration is the ring-algorithm migration that runs, nil if none
	// (see Operator.MigrateAlgorithm).
	Migration *Migration `json:"migration,omitempty"`
}

// EtcdAlarm is an alarm that stands in etcd: NOSPACE (its database
// reached --quota-backend-bytes) or CORRUPT, and the member that raised
// it.
type EtcdAlarm struct {
	// Alarm is the alarm's name, as etcdctl alarm list prints it.
	Alarm string `json:"alarm"`
	// Member is the ID of the etcd member that raised it, in hexadecimal.
	Member string `json:"etcd_member"`
}

// etcdAlarms converts etcderr's alarms; the result is never nil.
func etcdAlarms(as []etcderr.Alarm) []EtcdAlarm {
	out := make([]EtcdAlarm, len(as))
	for i, a := range as {
		out[i] = EtcdAlarm(a)
	}
	return out
}

// Status reads the fleet and summarizes it, with the alarms that stand in
// etcd.
func (o *Operator) Status(ctx context.Context) (Status, error) {
	v, err := o.view(ctx)
	if err != nil {
		return Status{}, err
	}
	alarms, _, err := etcderr.Alarms(ctx, o.alarms)
	if err != nil {
		return Status{}, fmt.Errorf("fleet: list etcd's alarms: %w", err)
	}
	f := v.fleet
	s := Status{
		Revision:    v.rev,
		Spec:        v.stored.Spec,
		RingVersion: f.Ring.Version(),
		Members:     append([]string{}, f.All...),
		Drained:     []string{},
		Unowned:     []int{},
		Handoffs:    []PartitionStatus{},
		Owned:       make(map[string]int, len(f.All)),
		Idle:        []string{},
		Alarms:      etcdAlarms(alarms),
		Features:    featureList(f.Features()),
		Requires:    featureList(v.stored.Requires),
	}
	if v.migration != nil {
		m := v.migrationProgress()
		s.Migration = &m
	}
	for _, id := range f.All {
		s.Owned[id] = 0
		if f.Drained[id] {
			s.Drained = append(s.Drained, id)
		}
	}
	for _, ps := range v.partitions() {
		switch {
		case ps.Epoch == 0:
			s.Unowned = append(s.Unowned, ps.Partition)
		case ps.Handoff:
			s.Handoffs = append(s.Handoffs, ps)
		}
		if ps.Epoch != 0 {
			s.Owned[ps.Owner]++
		}
	}
	for _, id := range f.All {
		if s.Owned[id] == 0 {
			s.Idle = append(s.Idle, id)
		}
	}
	return s, nil
}
