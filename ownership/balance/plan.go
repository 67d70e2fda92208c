package balance

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
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
	// Removes are the partitions whose balancer's moves are no longer
	// needed: their node is gone or drained, or the ring itself gives it
	// the partition.
	Removes []int `json:"removals"`
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
	parts  []int // the partitions it may give: loaded, not pinned, not cooling
	// noise is how far off its load per weight may read: the spread of
	// its partitions' measurement errors (see Config.NoiseMargin).
	noise float64
	// received is whether it received a partition within the cooldown:
	// its meter still ramps that partition's load up from zero, so its
	// load is not known yet and it receives nothing more until then.
	received bool
}

func (m *memberLoad) perWeight() float64 { return m.load / m.weight }

// Plan computes one pass over in by cfg's bands, budget and cooldown.
//
// Members are compared by load per unit of weight with the mean, total
// load over total weight. A pass is triggered only when some member is
// above cfg.Upper times the mean and has a move that cools it, or some
// member is below cfg.Lower times the mean and has a move that fills it:
// a fleet within the bands is left alone, so steady load causes no moves,
// and so is a member that carries a partition heavier than the band on
// its own (the bound of the imbalance).
//
// A member's load is a sum of measured rates, each off by some error, and
// a member whose load is mostly one or two heavy partitions reads up and
// down by as much as its heaviest partition's error. So a member
// triggers a pass only when it is beyond a band by more than its noise:
// cfg.NoiseMargin times the root of the sum of its partitions' squared
// loads, per weight (the spread of independent errors of NoiseMargin
// each). A member of many light partitions triggers at about the band's
// edge; one of a single heavy partition a little past it.
//
// While a partition moved within the cooldown (in.Moved: the balancer is
// still evening the fleet out), the bands' middles take the place of
// their edges as the trigger, noise margin included: a pass that ran out
// of budget is carried on by the next, so that a fleet is not left with
// members just inside an edge, which noise alone would later carry
// across. in.Moved comes from the times the moves record in etcd, so a
// balancer that just took over carries on too. With no partition within
// its cooldown, only the edges trigger.
//
// A triggered pass evens out past the bands' edges, to their middles (hi
// = (1+Upper)/2 and lo = (1+Lower)/2 times the mean), so that noise
// around an edge does not trigger the next pass (hysteresis). Up to the
// budget, while some member is above hi it makes the move that lowers the
// hotter of its pair most (ties to the cooler receiver); then, if the pass
// was triggered by a member below Lower, while the coolest member is
// below lo, the move into it that raises it most without taking its
// giver below lo or itself above hi. A move takes one partition, neither
// pinned nor moved within the cooldown, from a member to a member of
// lower load per weight, and leaves both below the giver's load per
// weight before it: the hottest of the pair cools. A pass stops when no
// move helps.
//
// A member that received a partition within the cooldown receives
// nothing more until then: its meter counts the new partition's load up
// from zero (an EWMA), so its load is not known yet, and sim/placement
// measured fleets overshooting on such members without this rule.
//
// Receivers are searched across every weight, not only the coolest
// member, so that a partition too heavy for a weight-1 member reaches a
// member of higher weight: the imbalance then comes down to the bound the
// heaviest partition sets. Givers are tried hottest first, so a member
// that carries a single heavy partition (nothing it can give) does not
// stop the others from evening out.
func Plan(in Input, cfg Config) Pass {
	r := in.Ring
	ids := r.Members()
	var pass Pass
	for _, p := range slices.Sorted(maps.Keys(in.Moves)) {
		node := in.Moves[p]
		_, member := slices.BinarySearch(ids, node)
		if ringOwner, _ := r.RingOwner(p); !member || ringOwner == node {
			pass.Removes = append(pass.Removes, p)
		}
	}
	if len(ids) < 2 {
		return pass
	}
	members := make([]*memberLoad, len(ids))
	byID := make(map[string]*memberLoad, len(ids))
	var total, weight float64
	recent := false // a partition was moved within the cooldown
	for i, id := range ids {
		members[i] = &memberLoad{id: id, weight: float64(r.Weight(id))}
		byID[id] = members[i]
		weight += members[i].weight
	}
	for p := range r.Partitions() {
		id, ok := r.Owner(p)
		if !ok {
			continue
		}
		l := loadOf(in, p)
		m := byID[id]
		m.load += l
		m.noise += l * l // the sum of squares here, the spread below
		total += l
		if t, ok := in.Moved[p]; ok && in.Now.Sub(t) < cfg.Cooldown {
			m.received, recent = true, true
		} else if l > 0 && !in.Pinned[p] {
			m.parts = append(m.parts, p)
		}
	}
	if total <= 0 {
		return pass
	}
	mean := total / weight
	margin := cfg.noiseMargin()
	for _, m := range members {
		m.noise = margin * math.Sqrt(m.noise) / m.weight
	}
	sortMembers(members)
	pass.Before = members[0].perWeight() / mean
	pass.After = pass.Before
	hi, lo := (1+cfg.Upper)/2*mean, (1+cfg.Lower)/2*mean
	upper, lower := cfg.Upper*mean, cfg.Lower*mean
	if recent {
		upper, lower = hi, lo
	}
	_, hot := cool(in, members, upper, true)
	_, cold := fill(in, members, hi, lower, true)
	if !hot && !cold {
		return pass
	}
	for budget := Budget(r.Partitions(), cfg.Budget); len(pass.Moves) < budget; {
		mv, ok := cool(in, members, hi, false)
		if !ok && cold {
			mv, ok = fill(in, members, hi, lo, false)
		}
		if !ok {
			break
		}
		mv.from.load -= mv.load
		mv.to.load += mv.load
		mv.from.parts = slices.DeleteFunc(mv.from.parts, func(q int) bool { return q == mv.p })
		pass.Moves = append(pass.Moves, Move{Partition: mv.p, From: mv.from.id, To: mv.to.id, Load: mv.load})
		if in.Moves[mv.p] == mv.to.id {
			pass.Removes = slices.DeleteFunc(pass.Removes, func(q int) bool { return q == mv.p })
		}
		sortMembers(members)
	}
	pass.After = members[0].perWeight() / mean
	return pass
}

// candidate is one possible move.
type candidate struct {
	p        int
	load     float64
	from, to *memberLoad
	score    float64 // lower is better
	toAfter  float64 // the receiver's load per weight after the move
}

// better reports whether c beats d: a lower score, then a cooler receiver
// after the move, then a lighter load (less moved), then the lower
// partition and receiver, so that a pass is a pure function of its input.
func (c candidate) better(d candidate) bool {
	return cmp.Or(cmp.Compare(c.score, d.score), cmp.Compare(c.toAfter, d.toAfter), cmp.Compare(c.load, d.load),
		cmp.Compare(c.p, d.p), cmp.Compare(c.to.id, d.to.id)) < 0
}

// cool returns the move that lowers most the hotter of its pair, from the
// hottest member above hi (above hi by more than its noise, if noisy) that
// has a move at all; members are sorted hottest first.
//
// Among members of one weight, the coolest receives best (a move's score
// and the receiver's load after it only grow with the receiver's load), so
// only the coolest member of each weight is tried as a receiver.
func cool(in Input, members []*memberLoad, hi float64, noisy bool) (candidate, bool) {
	receivers := coolestByWeight(members)
	for _, from := range members {
		if from.perWeight() <= hi {
			break
		}
		if noisy && from.perWeight() <= hi+from.noise {
			continue
		}
		var best candidate
		found := false
		for _, to := range receivers {
			if to.perWeight() >= from.perWeight() {
				continue
			}
			for _, p := range from.parts {
				l := loadOf(in, p)
				ta := (to.load + l) / to.weight
				after := max((from.load-l)/from.weight, ta)
				if after >= from.perWeight() {
					continue // the pair's hotter member would not cool
				}
				c := candidate{p: p, load: l, from: from, to: to, score: after, toAfter: ta}
				if !found || c.better(best) {
					best, found = c, true
				}
			}
		}
		if found {
			return best, true
		}
	}
	return candidate{}, false
}

// coolestByWeight returns, for each weight, the member of lowest load per
// weight (the lowest ID among equals) that may receive, in the order of
// members.
func coolestByWeight(members []*memberLoad) []*memberLoad {
	var out []*memberLoad
	for _, m := range members {
		if m.received {
			continue
		}
		i := slices.IndexFunc(out, func(o *memberLoad) bool { return o.weight == m.weight })
		switch {
		case i < 0:
			out = append(out, m)
		case m.perWeight() < out[i].perWeight() || (m.perWeight() == out[i].perWeight() && m.id < out[i].id):
			out[i] = m
		}
	}
	return out
}

// fill returns the move into the coolest member, if it is below lo (below
// lo by more than its noise, if noisy), that raises it most while it stays
// at or below hi and its giver stays at or above lo and above it.
func fill(in Input, members []*memberLoad, hi, lo float64, noisy bool) (candidate, bool) {
	to := members[len(members)-1]
	if to.received || to.perWeight() >= lo || (noisy && to.perWeight() >= lo-to.noise) {
		return candidate{}, false
	}
	var best candidate
	found := false
	for _, from := range members[:len(members)-1] {
		for _, p := range from.parts {
			l := loadOf(in, p)
			fa, ta := (from.load-l)/from.weight, (to.load+l)/to.weight
			if ta > hi || fa < lo || fa < ta {
				continue
			}
			c := candidate{p: p, load: l, from: from, to: to, score: -ta, toAfter: ta}
			if !found || c.better(best) {
				best, found = c, true
			}
		}
	}
	return best, found
}

// loadOf is partition p's load in in: 0 if unknown, and 0 for a load that
// is not a finite positive number (a report read from etcd is trusted for
// nothing else).
func loadOf(in Input, p int) float64 {
	if p < len(in.Loads) {
		if l := in.Loads[p]; l > 0 && !math.IsInf(l, 1) {
			return l
		}
	}
	return 0
}

// sortMembers sorts members hottest first, ties by ID.
func sortMembers(members []*memberLoad) {
	slices.SortFunc(members, func(a, b *memberLoad) int {
		return cmp.Or(cmp.Compare(b.perWeight(), a.perWeight()), cmp.Compare(a.id, b.id))
	})
}
