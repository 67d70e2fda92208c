package ring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Ring is an immutable assignment of every partition to at most one member:
// bounded-load hashing over a set of node IDs, by the Config's Algorithm.
// It is a pure function of the sorted member IDs (and their weights), the
// partition count, the load factor and the algorithm, so every node that
// sees the same member set computes the same Ring, whatever the order in
// which it learned of them.
//
// # Assignment
//
// AlgorithmWeighted, a new fleet's algorithm, is weighted rendezvous
// hashing matched under capacities (see AlgorithmWeighted, weighted.go and
// match.go).
//
// AlgorithmBounded, the count-only algorithm, is buraksezer/consistent's,
// with xxhash64: each member has replicationFactor points on a hash ring;
// partition p starts at the first point at or after xxhash64(p as 8
// little-endian bytes) and goes clockwise to the first member that owns
// fewer than its Capacity. Wherever consistent itself can build the
// ring, the assignment is identical to the one consistent.New computes
// (with the ID plus a NUL byte as member name), and tests hold the two to
// that. tenure runs the placement itself, for three reasons:
//
//   - consistent builds a member's point keys as name+index with no
//     separator, so "node-1" (index 11) and "node-11" (index 1) share keys and
//     one member silently loses points. tenure's keys are ID, NUL, index; NUL
//     cannot occur in an ID, so distinct IDs never share a key.
//   - consistent panics ("not enough room to distribute partitions") when its
//     per-member capacity ceil(floor(P/N)*LoadFactor) times N is below P:
//     always when there are more members than partitions, and with load
//     factor 1 whenever N does not divide P. There tenure raises the capacity
//     to ceil(LoadFactor*P/N), which always leaves room, and members beyond
//     capacity simply own nothing.
//   - consistent.New sorts all points again after adding each member, which
//     is quadratic in the member count (seconds for a few thousand members);
//     tenure sorts once.
//
// # Concurrency
//
// Lookups (PartitionOf, Owner) read a plain slice, take no lock and
// allocate nothing. A Ring is safe for concurrent use by
// multiple goroutines; publish a new one with atomic.Pointer to change
// membership. A nil *Ring behaves as a ring with no partitions and no members.
type Ring struct {
	partitions uint64
	load       float64
	algorithm  Algorithm
	members    []string // sorted
	weights    []int    // weights[i] is the weight the ring gave members[i]
	caps       []int    // caps[i] is the most partitions the ring gives members[i]
	owner      []int32  // owner[p] indexes members; -1 if none
	ringOwner  []int32  // the ring's own choice, before placements
	loads      []int    // loads[i] = partitions owned by members[i]
	version    uint64
}

// New computes the ring of members, each of weight 1, under cfg. Members
// may come in any order; each must pass ValidateNodeID and appear once
// (ErrDuplicateNodeID otherwise). An empty member list is valid: nobody
// owns anything.
//
// Every partition gets exactly one owner when there is at least one member,
// and no member owns more than its Capacity. With more members than
// partitions some members own nothing.
func New(members []string, cfg Config) (*Ring, error) {
	ms := make([]Member, len(members))
	for i, id := range members {
		ms[i] = Member{ID: id}
	}
	return NewWeighted(ms, cfg)
}

// NewWeighted computes the ring of members under cfg, by cfg's algorithm.
// Members may come in any order; each ID must pass ValidateNodeID and
// appear once (ErrDuplicateNodeID otherwise), and each weight must be in
// [0, MaxWeight] (ErrInvalidWeight otherwise; 0 means 1).
// AlgorithmWeighted bounds every member's partitions by
// ceil(LoadFactor*P*weight/total weight)+1, at most P (Capacity);
// AlgorithmBounded counts partitions only and gives every member weight 1,
// whatever it published.
func NewWeighted(members []Member, cfg Config) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, m := range members {
		if err := ValidateNodeID(m.ID); err != nil {
			return nil, err
		}
		if m.Weight < 0 || m.Weight > MaxWeight {
			return nil, fmt.Errorf("%w: %q has weight %d (must be in [0, %d])", ErrInvalidWeight, m.ID, m.Weight, MaxWeight)
		}
	}
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].ID == sorted[i-1].ID {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateNodeID, sorted[i].ID)
		}
	}

	p, n := cfg.Partitions, len(sorted)
	r := &Ring{
		partitions: uint64(p),
		load:       cfg.LoadFactor,
		algorithm:  cfg.algorithm(),
		members:    make([]string, n),
		weights:    make([]int, n),
		caps:       make([]int, n),
		owner:      make([]int32, p),
		loads:      make([]int, n),
	}
	for i, m := range sorted {
		r.members[i], r.weights[i] = m.ID, 1
		if r.algorithm == AlgorithmWeighted && m.Weight > 0 {
			r.weights[i] = m.Weight
		}
	}
	r.ringOwner = r.owner
	if r.algorithm == AlgorithmWeighted {
		r.version = weightedVersion(r.members, r.weights, p, cfg.LoadFactor)
	} else {
		r.version = ringVersion(r.members, p, cfg.LoadFactor)
	}
	if n == 0 {
		for i := range r.owner {
			r.owner[i] = -1
		}
		return r, nil
	}
	if r.algorithm == AlgorithmWeighted {
		weightedCapacities(r.weights, p, cfg.LoadFactor, r.caps)
		stableMatch(seeds(r.members, r.weights), r.caps, p, r.owner)
	} else {
		c := capacity(p, n, cfg.LoadFactor)
		for i := range r.caps {
			r.caps[i] = c
		}
		walk(ringPoints(r.members), p, n, c, r.owner)
	}
	for _, o := range r.owner {
		if o >= 0 { // always true, see walk and stableMatch
			r.loads[o]++
		}
	}
	return r, nil
}

// Partitions returns P, the number of partitions.
func (r *Ring) Partitions() int {
	if r == nil {
		return 0
	}
	return int(r.partitions)
}

// LoadFactor returns the load factor the ring was built with.
func (r *Ring) LoadFactor() float64 {
	if r == nil {
		return 0
	}
	return r.load
}

// Members returns a sorted copy of the member IDs.
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// memberIndex returns the index of id in members, or -1 if id is not a
// member.
func (r *Ring) memberIndex(id string) int {
	if r == nil {
		return -1
	}
	i, found := slices.BinarySearch(r.members, id)
	if !found {
		return -1
	}
	return i
}

// PartitionOf returns the partition of key in a fleet of the given number of
// partitions (a Ring's Partitions), as every node and client of the fleet
// computes it: xxhash64(key) mod partitions. It returns -1 if partitions is
// not positive (a nil Ring has none). It does not allocate.
func PartitionOf(key string, partitions int) int {
	if partitions <= 0 {
		return -1
	}
	return partitionOf(key, uint64(partitions))
}

func partitionOf(key string, partitions uint64) int { return int(xxhash.Sum64String(key) % partitions) }

// Owner returns the ID of the owner of partition p, with placements
// applied: the one answer to "who owns this partition" (and, with
// PartitionOf, "who owns this key"). ok is false if p is out of range or
// nobody owns it. It does not allocate.
func (r *Ring) Owner(p int) (id string, ok bool) {
	if r == nil || uint(p) >= uint(len(r.owner)) || r.owner[p] < 0 {
		return "", false
	}
	return r.members[r.owner[p]], true
}

// Owned returns the partitions owned by id in ascending order, or nil if it
// owns none (or is not a member); len(Owned(id)) is its load.
func (r *Ring) Owned(id string) []int {
	m := r.memberIndex(id)
	if m < 0 || r.loads[m] == 0 {
		return nil
	}
	owned := make([]int, 0, r.loads[m])
	for p, o := range r.owner {
		if int(o) == m {
			owned = append(owned, p)
		}
	}
	return owned
}

// Version returns a checksum of the ring's inputs (sorted member IDs,
// partition count, load factor) and of the assignment algorithm, so nodes can
// cheaply tell whether they hold the same view: rings built from the same
// inputs have equal versions, and rings built from different inputs have
// different versions except with probability about 2^-64. It is not ordered:
// a larger version is not a newer ring.
func (r *Ring) Version() uint64 {
	if r == nil {
		return 0
	}
	return r.version
}
