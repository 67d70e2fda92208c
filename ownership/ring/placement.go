package ring

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// This file holds the ring's bounded-load placement (consistent's
// algorithm, run by tenure; see Ring for why) and the version that names
// its inputs.

const (
	// replicationFactor is the number of points each member has on the hash
	// ring. More points give a more even spread before the load bound applies,
	// so fewer partitions spill to a second choice and fewer move when the
	// member set changes; the cost is build time (N*replicationFactor hashes,
	// sorted), paid off the lookup path. Part of the ring's definition: it is
	// folded into Version.
	replicationFactor = 40

	// ringAlgorithm names the assignment algorithm in Version, so that rings
	// computed by incompatible algorithms never compare equal.
	ringAlgorithm = "tenure/ring/v1"
)

// maxLoad returns ceil(load*p/n), at most p. It is never below ceil(p/n):
// with load >= 1, the rounded load*p is at least p and the rounded quotient
// at least the rounded p/n, which never rounds down onto an integer because
// p <= MaxPartitions keeps p/n far from integers it is not equal to. Each
// step is a single IEEE 754 operation, so every platform computes the same
// value.
func maxLoad(p, n int, load float64) int {
	c := math.Ceil(load * float64(p) / float64(n))
	if !(c < float64(p)) {
		return p
	}
	return int(c)
}

// consistentCapacity returns the most partitions buraksezer/consistent gives
// one of n members, computed exactly as its averageLoad does:
// ceil(floor(p/n)*load).
func consistentCapacity(p, n int, load float64) float64 {
	return math.Ceil(float64(uint64(p)/uint64(n)) * load)
}

// capacity returns the most partitions one of n >= 1 members may own:
// consistent's capacity where it leaves room for all p partitions, otherwise
// maxLoad. It never exceeds maxLoad.
func capacity(p, n int, load float64) int {
	bound := maxLoad(p, n, load)
	c := consistentCapacity(p, n, load)
	if c*float64(n) >= float64(p) && c <= float64(bound) {
		return int(c)
	}
	return bound
}

// point is one of a member's replicationFactor positions on the hash ring.
type point struct {
	hash   uint64
	member int32
}

// ringPoints returns the points of all members, hashed as consistent hashes
// them (xxhash64 of name, NUL, decimal index), sorted by hash and then by
// member index.
func ringPoints(ids []string) []point {
	points := make([]point, 0, len(ids)*replicationFactor)
	var buf []byte
	for i, id := range ids {
		for k := range replicationFactor {
			buf = append(buf[:0], id...)
			buf = append(buf, 0)
			buf = strconv.AppendInt(buf, int64(k), 10)
			points = append(points, point{hash: xxhash.Sum64(buf), member: int32(i)})
		}
	}
	slices.SortFunc(points, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.member, b.member)
	})
	return points
}

// walk is consistent's bounded-load placement: partition part starts at the
// first point at or after xxhash64(little-endian part) and goes clockwise to
// the first member that owns fewer than capacity partitions.
//
// Every partition gets an owner and nothing can panic: n*capacity >= p
// (capacity >= ceil(p/n)), so while a partition is unplaced some member is
// below capacity; every member has replicationFactor >= 1 points (two IDs
// whose points hash alike keep both, ordered by member index), so one full
// turn of the ring, which the loop bounds, reaches it. Indexes stay in range
// by construction.
func walk(points []point, p, n, capacity int, owner []int32) {
	loads := make([]int, n)
	var key [8]byte
	for part := range p {
		binary.LittleEndian.PutUint64(key[:], uint64(part))
		h := xxhash.Sum64(key[:])
		i := sort.Search(len(points), func(i int) bool { return points[i].hash >= h })
		owner[part] = -1
		for range len(points) {
			if i == len(points) {
				i = 0
			}
			if m := points[i].member; loads[m] < capacity {
				owner[part] = m
				loads[m]++
				break
			}
			i++
		}
	}
}

// ringVersion hashes a length-prefixed encoding of the ring's inputs and the
// algorithm's identity.
func ringVersion(sorted []string, p int, load float64) uint64 {
	buf := make([]byte, 0, 64+len(sorted)*16)
	buf = binary.AppendUvarint(buf, uint64(len(ringAlgorithm)))
	buf = append(buf, ringAlgorithm...)
	buf = binary.AppendUvarint(buf, replicationFactor)
	buf = binary.AppendUvarint(buf, uint64(p))
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(load))
	buf = binary.AppendUvarint(buf, uint64(len(sorted)))
	for _, id := range sorted {
		buf = binary.AppendUvarint(buf, uint64(len(id)))
		buf = append(buf, id...)
	}
	return xxhash.Sum64(buf)
}
