package fleet

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/ownership/ring"
)

// PlacementReport is how the fleet's partitions are placed, as every node
// computes it from one read of etcd: each member's weight and share, the
// imbalance, and the pins and moves.
type PlacementReport struct {
	// Revision is the etcd revision the report was read at.
	Revision int64 `json:"revision"`
	// Algorithm is the fleet's ring algorithm (ring.AlgorithmWeighted or
	// ring.AlgorithmBounded), named in JSON.
	Algorithm ring.Algorithm `json:"ring_algorithm"`
	// Members are the members, sorted by ID, drained ones included.
	Members []MemberPlacement `json:"members"`
	// Imbalance is the largest Partitions per unit of weight over the mean
	// among the members not drained (1 is perfectly even), 0 with none.
	Imbalance float64 `json:"imbalance"`
	// LoadImbalance is the largest Load per unit of weight over the mean
	// (what the balancer evens out), 0 without load reports.
	LoadImbalance float64 `json:"load_imbalance"`
	// Placements are the pins and moves in etcd, by partition.
	Placements []PlacementStatus `json:"placements"`
	// Balancer is the balancer's suspension and last applied pass.
	Balancer BalancerState `json:"balancer"`
}

// MemberPlacement is one member's share of the partitions.
type MemberPlacement struct {
	ID string `json:"id"`
	// Weight is the weight the ring gives the member (1 under
	// ring.AlgorithmBounded, whatever it published), 0 if it is drained.
	Weight int `json:"weight"`
	// Drained reports an operator's drain mark.
	Drained bool `json:"drained"`
	// Partitions is how many partitions the fleet's rule gives the member
	// (the ring with the placements applied); PerWeight is Partitions over
	// Weight.
	Partitions int     `json:"partitions"`
	PerWeight  float64 `json:"per_weight"`
	// Capacity is the most partitions the ring itself gives the member.
	Capacity int `json:"capacity"`
	// Load is the sum of the smoothed loads (units of work per second) of
	// the partitions the fleet's rule gives the member, each as its owner
	// reports it (or, until the owner's report includes a partition that
	// just moved, as its last owner reported it): what the balancer evens
	// out. LoadPerWeight is Load over Weight.
	Load          float64 `json:"load"`
	LoadPerWeight float64 `json:"load_per_weight"`
	// LoadWindow is the smoothing window of the member's own load report
	// (the time constant of its exponentially weighted moving average,
	// its ownership.Config.LoadWindow); 0 if it has published none.
	LoadWindow Seconds `json:"load_window_seconds"`
}

// PlacementStatus is one pin or move.
type PlacementStatus struct {
	Partition int `json:"partition"`
	// Node is where the entry places the partition; Origin is
	// "pin" (an operator's pin) or "balance" (a balancer's move).
	Node   string `json:"node"`
	Origin string `json:"origin"`
	// By and Reason are a pin's; Rev is the revision of the snapshot a
	// move was computed from (0 for a pin).
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	Rev    int64  `json:"snapshot_revision,omitempty"`
	// Moved is when the entry was written: a pin by the operator's clock,
	// a move by its balancer's (its cooldown runs from then); zero if
	// unknown (a pin written without its time).
	Moved time.Time `json:"moved,omitzero"`
	// Applied reports that the entry decides the partition's owner now;
	// false while Node is gone or drained (the ring decides) or when the
	// ring agrees with it.
	Applied bool `json:"applied"`
}

// Placement reads the fleet at one revision and reports its placement.
// Member loads and the load imbalance follow the balancer's rules, so a
// report read at the revision of a balancer's snapshot shows what that
// balancer saw. Errors wrap ErrNoSpec, ring.ErrInvalidSpec or the etcd
// error.
func (o *Operator) Placement(ctx context.Context) (PlacementReport, error) {
	v, err := o.view(ctx)
	if err != nil {
		return PlacementReport{}, err
	}
	reports, err := fleetview.ReadLoads(ctx, o.kv, o.layout, v.rev, hclog.NewNullLogger())
	if err != nil {
		return PlacementReport{}, err
	}
	bal, err := o.balancerAt(ctx, v.rev)
	if err != nil {
		return PlacementReport{}, err
	}
	f := v.fleet
	loads := fleetview.MemberLoads(f.Ring, fleetview.PartitionLoads(f.Ring, reports))
	rep := PlacementReport{Revision: v.rev, Algorithm: f.Ring.Algorithm(), Members: []MemberPlacement{}, Placements: []PlacementStatus{}, Balancer: bal}
	var sum, top, loadSum, loadTop float64
	for _, id := range f.All {
		m := MemberPlacement{ID: id, Drained: f.Drained[id], Weight: f.Ring.Weight(id), Partitions: len(f.Ring.Owned(id)), Capacity: f.Ring.Capacity(id), Load: loads[id]}
		if lr, ok := reports[id]; ok {
			m.LoadWindow = seconds(lr.Window)
		}
		if m.Weight > 0 {
			m.PerWeight = float64(m.Partitions) / float64(m.Weight)
			m.LoadPerWeight = m.Load / float64(m.Weight)
			sum += float64(m.Partitions)
			top = max(top, m.PerWeight)
			loadSum += m.Load
			loadTop = max(loadTop, m.LoadPerWeight)
		}
		rep.Members = append(rep.Members, m)
	}
	if w := totalWeight(rep.Members); w > 0 {
		if sum > 0 {
			rep.Imbalance = top / (sum / float64(w))
		}
		if loadSum > 0 {
			rep.LoadImbalance = loadTop / (loadSum / float64(w))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(f.Placements)) {
		pl := f.Placements[p]
		owner, _ := f.Ring.Owner(p)
		ringOwner, _ := f.Ring.RingOwner(p)
		st := PlacementStatus{Partition: p, Node: pl.Node, Origin: pl.Origin, By: pl.By, Reason: pl.Reason, Rev: pl.Rev, Applied: owner != ringOwner}
		if pl.Time > 0 {
			st.Moved = time.UnixMilli(pl.Time).UTC()
		}
		rep.Placements = append(rep.Placements, st)
	}
	return rep, nil
}

func totalWeight(ms []MemberPlacement) int {
	w := 0
	for _, m := range ms {
		w += m.Weight
	}
	return w
}
