package ring

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// This file holds AlgorithmWeighted: bounded-load weighted rendezvous
// hashing, all in integer arithmetic so that every platform computes the
// same assignment.

// ringAlgorithmWeighted names AlgorithmWeighted in Version.
const ringAlgorithmWeighted = "tenure/ring/v2-weighted-rendezvous"

// mix64 is splitmix64's finalizer: a bijection of 64-bit words whose output
// bits each depend on every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// seeds returns, for every member, one seed per unit of its weight: the
// xxhash64 of its ID, a NUL and the unit's index as 8 little-endian bytes.
// NUL cannot occur in an ID, so distinct (ID, unit) pairs never share a key.
func seeds(ids []string, weights []int) [][]uint64 {
	out := make([][]uint64, len(ids))
	var buf []byte
	for i, id := range ids {
		s := make([]uint64, weights[i])
		for k := range s {
			buf = append(buf[:0], id...)
			buf = append(buf, 0)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(k))
			s[k] = xxhash.Sum64(buf)
		}
		out[i] = s
	}
	return out
}

// score is member seeds' rendezvous score for partition part: the largest
// of one hash per unit of weight. A member of weight w thus wins a contest
// among members of total weight W with probability w/W, and its score for
// a partition depends on nothing but its ID, its weight and the partition,
// so a join, a leave or a change of one member's weight moves only the
// partitions that member gains or loses, up to the bound below.
func score(seeds []uint64, part uint64) uint64 {
	var best uint64
	for _, s := range seeds {
		if h := mix64(s ^ mix64(part+0x9e3779b97f4a7c15)); h > best {
			best = h
		}
	}
	return best
}

// weightedCapacity returns the most partitions a member of weight w may own
// out of p when the members' weights add up to total: ceil(load*p*w/total),
// at most p and at least 1.
func weightedCapacity(p, w, total int, load float64) int {
	c := math.Ceil(load * float64(p) * float64(w) / float64(total))
	switch {
	case !(c < float64(p)):
		return p
	case c < 1:
		return 1
	}
	return int(c)
}

// rendezvous assigns every partition, in ascending order, to the member of
// highest score that owns fewer than its capacity, ties going to the lower
// member index. The capacities add up to at least load*p >= p, so a member
// with room always exists; should rounding ever leave none, the partition
// goes to the member of highest score regardless, so that every partition
// gets an owner.
func rendezvous(ids []string, weights []int, p int, load float64, owner []int32, caps []int) {
	n := len(ids)
	total := 0
	for _, w := range weights {
		total += w
	}
	for i, w := range weights {
		caps[i] = weightedCapacity(p, w, total, load)
	}
	sd := seeds(ids, weights)
	loads := make([]int, n)
	for part := range p {
		best, bestAny := -1, -1
		var bestScore, bestAnyScore uint64
		for i := range n {
			s := score(sd[i], uint64(part))
			if bestAny < 0 || s > bestAnyScore {
				bestAny, bestAnyScore = i, s
			}
			if loads[i] < caps[i] && (best < 0 || s > bestScore) {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			best = bestAny
		}
		owner[part] = int32(best)
		loads[best]++
	}
}

// weightedVersion hashes a length-prefixed encoding of the weighted ring's
// inputs and the algorithm's identity.
func weightedVersion(sorted []string, weights []int, p int, load float64) uint64 {
	buf := make([]byte, 0, 64+len(sorted)*20)
	buf = binary.AppendUvarint(buf, uint64(len(ringAlgorithmWeighted)))
	buf = append(buf, ringAlgorithmWeighted...)
	buf = binary.AppendUvarint(buf, uint64(p))
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(load))
	buf = binary.AppendUvarint(buf, uint64(len(sorted)))
	for i, id := range sorted {
		buf = binary.AppendUvarint(buf, uint64(len(id)))
		buf = append(buf, id...)
		buf = binary.AppendUvarint(buf, uint64(weights[i]))
	}
	return xxhash.Sum64(buf)
}
