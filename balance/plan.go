package balance

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/tenure-go/tenure/ring"
)

// Input is what one pass plans from: the fleet's owner rule, the load of
// every partition, the placements and when each partition last moved.
type Input struct {
	// Ring is the fleet's ring with the placements applied: the owner of
	// every partition now.
	Ring *ring.Ring
	// Loads is the smoothed load of every partition (units per second).
	Loads []float64
	// Pinned are the partitions an operator pinned: never moved.
	Pinned map[int]bool
	// Moves are the balancer's moves in etcd: partition -> node.
	Moves map[int]string
	// Moved is when each partition was last moved by a balancer.
	Moved map[int]time.Time
	// Now is the time of the pass.
	Now time.Time
}

// Move is one partition moved by a pass.
type Move struct {
	Partition int     `json:"partition"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Load      float64 `json:"load"`
}

// Pass is what one pass decided.
type Pass struct {
	// Moves are the partitions to move, at most the budget.
	Moves []Move `json:"moves"`
	// Removes are the balancer's moves no longer needed: their node is
	// gone or drained, or the ring itself gives it the partition.
	Removes []int `json:"removes"`
	// Before and After are the imbalance (max over mean load per weight)
	// before the pass and as the pass expects it after its moves.
	Before float64 `json:"before"`
	After  float64 `json:"after"`
}

// Budget returns the most moves a pass makes among p partitions: the
// fraction cfg.Budget of p, at least 1.
func Budget(p int, fraction float64) int {
	return max(1, int(fraction*float64(p)))
}

// memberLoad is one member's load as a pass sees it.
type memberLoad struct {
	id     string
	weight float64
	load   float64
}

func (m *memberLoad) perWeight() float64 { return m.load / m.weight }

// Plan computes one pass over in by cfg's bands, budget and cooldown.
//
// Members are compared by load per unit of weight with the mean, total
// load over total weight. Nothing moves unless some member is above
// cfg.Upper times the mean (a fleet within the band is left alone, so
// steady load causes no moves). Then, up to the budget, the member of
// highest load per weight gives one partition to the member of lowest,
// while the giver is above the middle of the upper band ((1+Upper)/2
// times the mean) and the receiver below the middle of the lower band
// ((1+Lower)/2): evening out past the band's edge is the hysteresis that
// keeps noise around the edge from triggering the next pass. It moves the
// partition,
// neither pinned nor moved within the cooldown, whose load comes closest
// to evening the two out while leaving the receiver below the giver. A
// pass stops when no such move helps.
func Plan(in Input, cfg Config) Pass {
	r := in.Ring
	var pass Pass
	for _, p := range slices.Sorted(maps.Keys(in.Moves)) {
		node := in.Moves[p]
		if ringOwner, _ := r.RingOwner(p); r.MemberIndex(node) < 0 || ringOwner == node {
			pass.Removes = append(pass.Removes, p)
		}
	}
	ids := r.Members()
	if len(ids) < 2 {
		return pass
	}
	members := make([]*memberLoad, len(ids))
	byID := make(map[string]*memberLoad, len(ids))
	var total, weight float64
	for i, id := range ids {
		members[i] = &memberLoad{id: id, weight: float64(r.Weight(id))}
		byID[id] = members[i]
		weight += members[i].weight
	}
	owned := make(map[string][]int, len(ids))
	for p := range r.Partitions() {
		id, ok := r.Owner(p)
		if !ok {
			continue
		}
		l := 0.0
		if p < len(in.Loads) {
			l = in.Loads[p]
		}
		byID[id].load += l
		total += l
		owned[id] = append(owned[id], p)
	}
	if total <= 0 {
		return pass
	}
	mean := total / weight
	imbalance := func() float64 {
		top := 0.0
		for _, m := range members {
			top = max(top, m.perWeight())
		}
		return top / mean
	}
	pass.Before = imbalance()
	budget := Budget(r.Partitions(), cfg.Budget)
	if pass.Before <= cfg.Upper {
		pass.After = pass.Before
		return pass
	}
	// Triggered: even out to the middle of each band, so that noise around
	// the band's edge does not trigger the next pass.
	hi, lo := (1+cfg.Upper)/2*mean, (1+cfg.Lower)/2*mean
	for len(pass.Moves) < budget {
		slices.SortFunc(members, func(a, b *memberLoad) int {
			return cmp.Or(cmp.Compare(b.perWeight(), a.perWeight()), cmp.Compare(a.id, b.id))
		})
		from, to := members[0], members[len(members)-1]
		if from.perWeight() <= hi || to.perWeight() >= lo {
			break
		}
		p, ok := pick(in, cfg, owned[from.id], from, to)
		if !ok {
			break
		}
		l := in.Loads[p]
		from.load -= l
		to.load += l
		owned[from.id] = slices.DeleteFunc(owned[from.id], func(q int) bool { return q == p })
		owned[to.id] = append(owned[to.id], p)
		pass.Moves = append(pass.Moves, Move{Partition: p, From: from.id, To: to.id, Load: l})
		if in.Moves[p] == to.id {
			pass.Removes = slices.DeleteFunc(pass.Removes, func(q int) bool { return q == p })
		}
	}
	pass.After = imbalance()
	return pass
}

// pick returns the partition of parts (owned by from) whose move to to
// best evens the two out: the load closest to the transfer that equalizes
// their load per weight, among those that leave to below from's load per
// weight after the move; never a pinned partition or one moved within the
// cooldown.
func pick(in Input, cfg Config, parts []int, from, to *memberLoad) (int, bool) {
	// Moving l equalizes when (from.load-l)/wf == (to.load+l)/wt.
	wf, wt := from.weight, to.weight
	ideal := (from.load*wt - to.load*wf) / (wf + wt)
	best, bestGap := -1, 0.0
	for _, p := range parts {
		l := 0.0
		if p < len(in.Loads) {
			l = in.Loads[p]
		}
		if l <= 0 || in.Pinned[p] {
			continue
		}
		if t, ok := in.Moved[p]; ok && in.Now.Sub(t) < cfg.Cooldown {
			continue
		}
		if (to.load+l)/wt >= from.perWeight() {
			continue // the pair's hotter member would not cool: no gain
		}
		gap := l - ideal
		if gap < 0 {
			gap = -gap
		}
		if best < 0 || gap < bestGap || (gap == bestGap && p < best) {
			best, bestGap = p, gap
		}
	}
	return best, best >= 0
}
