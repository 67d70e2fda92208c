package ring

// This file assigns AlgorithmWeighted's partitions: the stable matching of
// partitions to members under their capacities.
//
// Every (partition, member) pair has a rank: the member's score for the
// partition (score), higher first, then the lower member index, then the
// lower partition index. Each partition goes to the member of its best pair
// whose member, being at capacity, does not hold only better pairs. This is
// the one assignment in which no partition and member would both rather be
// together than where they are (the stable matching: a single rank orders
// both sides' preferences, so exactly one exists), and it is what taking the
// pairs in rank order and keeping each whose partition is free and whose
// member has room yields. It depends on no order of the partitions, so a
// join, a leave or a weight change moves only what the changed member
// gains or loses and the short chains that capacity forces: a member that
// gives a partition up takes back the best one it had turned away, whose
// previous owner may do the same in turn.
//
// It is computed as partitions propose and members hold (Gale and
// Shapley): each partition proposes to its members in rank order; a member
// holds the best proposals up to its capacity and turns the worst away,
// which then proposes to its next member. The outcome is the stable
// matching whatever the order of the proposals. A partition's next members
// come from a short list of its best (candidates); the list is refilled
// from a full scan in the rare case a partition is turned away by all of
// them.

// candidates is how many of a partition's best members one scan keeps.
const candidates = 4

// candidate is a member and its score for one partition.
type candidate struct {
	score  uint64
	member int32
}

// better reports whether member a, of score as, ranks before member b, of
// score bs, for one partition.
func better(as uint64, a int32, bs uint64, b int32) bool {
	return as > bs || (as == bs && a < b)
}

// bestAfter fills dst with the up to len(dst) members of best rank for the
// partition of hash h (see partHash), in rank order, and returns how many.
// With after set, only members ranked after (s0, m0) count.
func bestAfter(sd [][]uint64, h uint64, dst []candidate, after bool, s0 uint64, m0 int32) int {
	k := 0
	for i, seeds := range sd {
		s, m := score(seeds, h), int32(i)
		if after && !better(s0, m0, s, m) {
			continue
		}
		if k == len(dst) && !better(s, m, dst[k-1].score, dst[k-1].member) {
			continue
		}
		j := k
		if k < len(dst) {
			k++
		} else {
			j--
		}
		for j > 0 && better(s, m, dst[j-1].score, dst[j-1].member) {
			dst[j] = dst[j-1]
			j--
		}
		dst[j] = candidate{s, m}
	}
	return k
}

// held is a partition a member holds, with the member's score for it.
type held struct {
	score uint64
	part  int32
}

// worse reports whether a member holding a would rather give it up than b.
func worse(a, b held) bool {
	return a.score < b.score || (a.score == b.score && a.part > b.part)
}

// holding is a member's held partitions: a heap with the worst at the root.
type holding []held

func (h holding) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !worse(h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h holding) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && worse(h[r], h[c]) {
			c = r
		}
		if !worse(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// stableMatch sets owner[part] for every partition to its member in the
// stable matching of p partitions to the members of seeds sd under caps.
// The capacities must add up to at least p (weightedCapacities' do: each is
// at least its share of load*p >= p, or p itself); then no partition is
// turned away by every member, since those would all hold their capacity,
// more than the p-1 other partitions. Were it to happen anyway, the
// partition would go to its best member over capacity, so that every
// partition still gets an owner and the loop still ends.
func stableMatch(sd [][]uint64, caps []int, p int, owner []int32) {
	n := len(sd)
	k := min(candidates, n)
	list := make([]candidate, p*k)
	count := make([]int8, p) // valid entries of each partition's list
	next := make([]int8, p)  // its next entry to propose to
	for part := range p {
		count[part] = int8(bestAfter(sd, partHash(part), list[part*k:(part+1)*k], false, 0, 0))
	}
	holds := make([]holding, n)
	free := make([]int32, p) // partitions that hold no member, proposing next
	for i := range free {
		free[i] = int32(p - 1 - i)
	}
	for len(free) > 0 {
		part := free[len(free)-1]
		free = free[:len(free)-1]
		l := list[int(part)*k : (int(part)+1)*k]
		if next[part] == count[part] {
			last := l[count[part]-1]
			count[part] = int8(bestAfter(sd, partHash(int(part)), l, true, last.score, last.member))
			next[part] = 0
			if count[part] == 0 { // unreachable while caps add up to p
				bestAfter(sd, partHash(int(part)), l[:1], false, 0, 0)
				owner[part] = l[0].member
				continue
			}
		}
		c := l[next[part]]
		next[part]++
		m, e := c.member, held{c.score, part}
		h := holds[m]
		switch {
		case len(h) < caps[m]:
			h = append(h, e)
			h.up(len(h) - 1)
			holds[m] = h
			owner[part] = m
		case len(h) > 0 && worse(h[0], e):
			free = append(free, h[0].part)
			h[0] = e
			h.down(0)
			owner[part] = m
		default:
			free = append(free, part)
		}
	}
}
