package ring

import (
	"encoding/binary"
	"math"
	"math/big"

	"github.com/cespare/xxhash/v2"
)

// This file holds AlgorithmWeighted's inputs: the members' seeds and
// scores, their capacities, and the version that names them. match.go
// assigns the partitions. All of it is integer arithmetic, so that every
// platform computes the same assignment.

// ringAlgorithmWeighted names AlgorithmWeighted in Version.
const ringAlgorithmWeighted = "tenure/ring/v3-weighted-stable-rendezvous"

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

// partHash is the word a partition's scores are computed from.
func partHash(part int) uint64 { return mix64(uint64(part) + 0x9e3779b97f4a7c15) }

// score is a member's rendezvous score for the partition of hash h (see
// partHash): the largest of one hash per unit of its weight (its seeds). A
// member of weight w thus has the top score among members of total weight
// W with probability w/W, and its score for a partition depends on nothing
// but its ID, its weight and the partition.
func score(seeds []uint64, h uint64) uint64 {
	var best uint64
	for _, s := range seeds {
		if v := mix64(s ^ h); v > best {
			best = v
		}
	}
	return best
}

// weightedCapacity returns the most partitions a member of weight w may own
// out of p when the members' weights add up to total: ceil(load*p*w/total)
// computed exactly (load is a binary fraction, so the product is a rational
// number), plus one, at most p.
//
// The one partition above the load factor's room is for members of a few
// partitions. At 1,000 members of 4,096 partitions, a tenth of weight 2, a
// member of weight 1 expects 3.7 partitions and ceil alone gives it room
// for 5: a third of the members sit at their capacity, and every partition
// one of them gives up or must take draws in another (a join or a leave
// moved 1.2 to 1.3 times its share). With the extra partition it moves
// 1.0 to 1.1 times its share; at 100 partitions a member the extra one is
// 1% of the bound.
func weightedCapacity(p, w, total int, load float64) int {
	var q big.Rat
	if q.SetFloat64(load) == nil { // exact; nil only for a load Validate refuses
		return p
	}
	q.Mul(&q, new(big.Rat).SetFrac64(int64(p)*int64(w), int64(total)))
	// ceil(a/b) + 1 for a, b > 0 is (a+b-1)/b + 1, the quotient rounded
	// down.
	num, den := q.Num(), q.Denom()
	c := new(big.Int).Add(num, den)
	c.Sub(c, big.NewInt(1))
	c.Quo(c, den)
	c.Add(c, big.NewInt(1))
	if c.Cmp(big.NewInt(int64(p))) >= 0 {
		return p
	}
	return int(c.Int64())
}

// weightedCapacities fills caps with every member's capacity. Members of
// one weight share one capacity, computed once.
func weightedCapacities(weights []int, p int, load float64, caps []int) {
	total := 0
	for _, w := range weights {
		total += w
	}
	var byWeight [MaxWeight + 1]int
	for i, w := range weights {
		if byWeight[w] == 0 {
			byWeight[w] = weightedCapacity(p, w, total, load)
		}
		caps[i] = byWeight[w]
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
