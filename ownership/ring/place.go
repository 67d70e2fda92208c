package ring

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Placement names the node a partition is placed on, over the ring's own
// choice: an operator's pin or a balancer's move.
type Placement struct {
	Partition int
	Node      string
}

// Place returns the ring r with placements applied: each placement whose
// partition is in [0, P) and whose node is a member of r gives that
// partition to that node; every other placement is ignored, so a placement
// on a node that is gone or drained (not a member of the ring) falls back
// to the ring. Where several name one partition, the last one counts. The
// result is a pure function of r and the placements, whatever their order
// otherwise; r itself is unchanged. Version folds in the placements
// applied, and a ring with none applied is r itself.
func (r *Ring) Place(placements []Placement) *Ring {
	if r == nil || len(r.members) == 0 {
		return r
	}
	applied := make(map[int]int32)
	for _, pl := range placements {
		m := r.memberIndex(pl.Node)
		if m < 0 || uint(pl.Partition) >= uint(len(r.owner)) {
			continue
		}
		applied[pl.Partition] = int32(m)
	}
	if len(applied) == 0 {
		return r
	}
	out := *r
	out.owner = slices.Clone(r.ringOwner)
	out.loads = make([]int, len(r.members))
	parts := make([]int, 0, len(applied))
	for p, m := range applied {
		out.owner[p] = m
		parts = append(parts, p)
	}
	for _, o := range out.owner {
		out.loads[o]++
	}
	slices.SortFunc(parts, cmp.Compare)
	buf := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(parts)*12), r.version)
	for _, p := range parts {
		buf = binary.AppendUvarint(buf, uint64(p))
		buf = binary.AppendUvarint(buf, uint64(applied[p]))
	}
	out.version = xxhash.Sum64(buf)
	return &out
}

// RingOwner returns the ID of the member the ring alone gives partition p,
// whatever a placement says; a placement gives p another owner where it
// differs from Owner(p). ok is false if p is out of range or nobody owns
// it.
func (r *Ring) RingOwner(p int) (id string, ok bool) {
	if r == nil || uint(p) >= uint(len(r.ringOwner)) || r.ringOwner[p] < 0 {
		return "", false
	}
	return r.members[r.ringOwner[p]], true
}

// Algorithm returns the ring's algorithm, AlgorithmWeighted or
// AlgorithmBounded; 0 (unset) for a nil Ring.
func (r *Ring) Algorithm() Algorithm {
	if r == nil {
		return 0
	}
	return r.algorithm
}

// Weight returns the capacity weight the ring gives member id: its
// published weight under AlgorithmWeighted, 1 under AlgorithmBounded, 0 if
// id is not a member.
func (r *Ring) Weight(id string) int {
	m := r.memberIndex(id)
	if m < 0 {
		return 0
	}
	return r.weights[m]
}

// Capacity returns the most partitions the ring itself gives member id (0
// if id is not a member). Placements may give a member more.
//
// Under AlgorithmWeighted it is ceil(LoadFactor*P*weight/total weight)+1,
// at most P. Under AlgorithmBounded every member has the same capacity:
// consistent's ceil(floor(P/N)*LoadFactor) where that leaves room for all
// P partitions, and ceil(LoadFactor*P/N) otherwise; it is never more than
// ceil(LoadFactor*P/N) or P, and never less than ceil(P/N).
func (r *Ring) Capacity(id string) int {
	m := r.memberIndex(id)
	if m < 0 {
		return 0
	}
	return r.caps[m]
}
