package ring

import "slices"

// The tests' views of a Ring's internals: what the exported lookups
// (Owner, Owned, Capacity, PartitionOf) derive from, read directly so that
// the tests hold the two to each other.

// ownerIndex returns the index in members of the owner of partition p, or
// -1 if p is out of range or nobody owns it.
func ownerIndex(r *Ring, p int) int {
	if r == nil || uint(p) >= uint(len(r.owner)) {
		return -1
	}
	return int(r.owner[p])
}

// ownerOfKey returns the owner of key's partition, as a caller asks it.
func ownerOfKey(r *Ring, key string) (string, bool) {
	return r.Owner(PartitionOf(key, r.Partitions()))
}

// assignment returns the owner of every partition ("" for none), nil for
// a nil Ring.
func assignment(r *Ring) []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.owner))
	for p, o := range r.owner {
		if o >= 0 {
			out[p] = r.members[o]
		}
	}
	return out
}

// loadOf returns the number of partitions the ring's bookkeeping says id
// owns (0 if it is not a member).
func loadOf(r *Ring, id string) int {
	m := r.memberIndex(id)
	if m < 0 {
		return 0
	}
	return r.loads[m]
}

// maxCapacity returns the largest member's Capacity, 0 without members.
func maxCapacity(r *Ring) int {
	if r == nil || len(r.caps) == 0 {
		return 0
	}
	return slices.Max(r.caps)
}

// isPlaced reports whether a placement gives partition p another owner than
// the ring's own.
func isPlaced(r *Ring, p int) bool {
	return r != nil && uint(p) < uint(len(r.owner)) && r.owner[p] != r.ringOwner[p]
}
