package ownership

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

const (
	// MaxPartitions is the largest partition count a ring accepts. Every
	// partition is one claim key in etcd, so real clusters stay far below it.
	MaxPartitions = 1 << 20

	// MaxNodeIDLen is the longest node ID in bytes that ValidateNodeID
	// accepts: long enough for any DNS name.
	MaxNodeIDLen = 253

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

// RingConfig holds the tunables of a Ring. Every node of a cluster must use
// the same RingConfig, or their rings disagree.
type RingConfig struct {
	// Partitions is P, the fixed number of partitions. A key belongs to
	// partition xxhash64(key) mod P. It must be in [1, MaxPartitions].
	// Changing it moves nearly every key, so it is fixed for the life of a
	// cluster; size it for at least 10x the largest expected fleet so that
	// every node gets many partitions and load evens out.
	Partitions int

	// LoadFactor bounds how unevenly partitions are spread: no member owns
	// more than ceil(LoadFactor*P/N) of the P partitions when there are N
	// members. It must be a finite number >= 1. 1 gives the most even spread
	// but moves more partitions when members join or leave; larger values move
	// fewer partitions and allow more imbalance.
	LoadFactor float64
}

// DefaultRingConfig returns 1024 partitions (10x a fleet of 100 nodes) and a
// load factor of 1.25, the value the bounded-load consistent hashing paper
// (Mirrokni, Thorup and Zadimoghaddam) recommends: no node owns more than 25%
// above the mean, and a join or leave moves about 1.06x the minimal share of
// partitions (measured over random fleets of 3 to 20 nodes; load factor 1
// moves about 1.4x).
func DefaultRingConfig() RingConfig {
	return RingConfig{Partitions: 1024, LoadFactor: 1.25}
}

// Validate reports whether c is usable. Errors wrap ErrInvalidPartitions or
// ErrInvalidLoadFactor.
func (c RingConfig) Validate() error {
	if c.Partitions <= 0 {
		return fmt.Errorf("%w: %d (must be > 0)", ErrInvalidPartitions, c.Partitions)
	}
	if c.Partitions > MaxPartitions {
		return fmt.Errorf("%w: %d (must be <= %d)", ErrInvalidPartitions, c.Partitions, MaxPartitions)
	}
	if math.IsNaN(c.LoadFactor) || math.IsInf(c.LoadFactor, 0) || c.LoadFactor < 1 {
		return fmt.Errorf("%w: %v (must be a finite number >= 1)", ErrInvalidLoadFactor, c.LoadFactor)
	}
	return nil
}

// ValidateNodeID reports whether id can name a node: it must be 1 to
// MaxNodeIDLen bytes of valid UTF-8 made only of printable characters, with no
// '/', no white space and no control characters (NUL included). Errors wrap
// ErrInvalidNodeID and quote the ID.
func ValidateNodeID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidNodeID)
	}
	if len(id) > MaxNodeIDLen {
		return fmt.Errorf("%w: %q... is %d bytes (must be <= %d)", ErrInvalidNodeID, id[:32], len(id), MaxNodeIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidNodeID, id)
	}
	for i, r := range id {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %q has forbidden character %q at byte %d", ErrInvalidNodeID, id, r, i)
		}
	}
	return nil
}

// Ring is an immutable assignment of every partition to at most one member:
// bounded-load consistent hashing over a set of node IDs. It is a pure
// function of the sorted member IDs, the partition count and the load factor,
// so every node that sees the same member set computes the same Ring,
// whatever the order in which it learned of them.
//
// # Assignment
//
// The algorithm is buraksezer/consistent's, with xxhash64: each member has
// replicationFactor points on a hash ring; partition p starts at the first
// point at or after xxhash64(p as 8 little-endian bytes) and goes clockwise to
// the first member that owns fewer than MaxLoad partitions. Wherever
// consistent itself can build the ring, the assignment is identical to the
// one consistent.New computes (with the ID plus a NUL byte as member name),
// and tests hold the two to that. tenure runs the placement itself, for three
// reasons:
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
// Lookups (PartitionOf, OwnerIndex, Owner, OwnerOfKey) read a plain slice,
// take no lock and allocate nothing. A Ring is safe for concurrent use by
// multiple goroutines; publish a new one with atomic.Pointer to change
// membership. A nil *Ring behaves as a ring with no partitions and no members.
type Ring struct {
	partitions uint64
	load       float64
	maxLoad    int
	members    []string // sorted
	owner      []int32  // owner[p] indexes members; -1 if none
	loads      []int    // loads[i] = partitions owned by members[i]
	version    uint64
}

// NewRing computes the ring of members under cfg. Members may come in any
// order; each must pass ValidateNodeID and appear once (ErrDuplicateNodeID
// otherwise). An empty member list is valid: nobody owns anything.
//
// Every partition gets exactly one owner when there is at least one member,
// and no member owns more than MaxLoad partitions. With more members than
// partitions some members own nothing.
func NewRing(members []string, cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, id := range members {
		if err := ValidateNodeID(id); err != nil {
			return nil, err
		}
	}
	sorted := slices.Clone(members)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateNodeID, sorted[i])
		}
	}

	p, n := cfg.Partitions, len(sorted)
	r := &Ring{
		partitions: uint64(p),
		load:       cfg.LoadFactor,
		members:    sorted,
		owner:      make([]int32, p),
		loads:      make([]int, n),
	}
	r.version = ringVersion(sorted, p, cfg.LoadFactor)
	if n == 0 {
		for i := range r.owner {
			r.owner[i] = -1
		}
		return r, nil
	}
	r.maxLoad = capacity(p, n, cfg.LoadFactor)
	walk(ringPoints(sorted), p, n, r.maxLoad, r.owner)
	for _, o := range r.owner {
		if o >= 0 { // always true, see walk
			r.loads[o]++
		}
	}
	return r, nil
}

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

// MaxLoad returns the most partitions any one member may own. It is
// consistent's capacity ceil(floor(P/N)*LoadFactor) where that leaves room for
// all P partitions, and ceil(LoadFactor*P/N) otherwise; it is never more than
// ceil(LoadFactor*P/N) or P, and never less than ceil(P/N). It is 0 when there
// are no members.
func (r *Ring) MaxLoad() int {
	if r == nil {
		return 0
	}
	return r.maxLoad
}

// Members returns a sorted copy of the member IDs.
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// MemberIndex returns the index of id in Members, or -1 if id is not a
// member. Compare it with OwnerIndex to ask "do I own this partition?"
// without comparing strings.
func (r *Ring) MemberIndex(id string) int {
	if r == nil {
		return -1
	}
	i, found := slices.BinarySearch(r.members, id)
	if !found {
		return -1
	}
	return i
}

// PartitionOf returns the partition of key, xxhash64(key) mod Partitions. It
// does not allocate. It returns -1 for a nil ring.
func (r *Ring) PartitionOf(key string) int {
	if r == nil {
		return -1
	}
	return partitionOf(key, r.partitions)
}

// PartitionOf returns the partition of key in a fleet of the given number of
// partitions, as every Ring of the fleet computes it: xxhash64(key) mod
// partitions. It returns -1 if partitions is not positive. It does not
// allocate.
func PartitionOf(key string, partitions int) int {
	if partitions <= 0 {
		return -1
	}
	return partitionOf(key, uint64(partitions))
}

func partitionOf(key string, partitions uint64) int { return int(xxhash.Sum64String(key) % partitions) }

// OwnerIndex returns the index in Members of the owner of partition p, or -1
// if p is out of range or nobody owns it. It does not allocate.
func (r *Ring) OwnerIndex(p int) int {
	if r == nil || uint(p) >= uint(len(r.owner)) {
		return -1
	}
	return int(r.owner[p])
}

// Owner returns the ID of the owner of partition p. ok is false if p is out
// of range or nobody owns it.
func (r *Ring) Owner(p int) (id string, ok bool) {
	i := r.OwnerIndex(p)
	if i < 0 {
		return "", false
	}
	return r.members[i], true
}

// OwnerOfKey returns the ID of the owner of key's partition. ok is false if
// nobody owns it.
func (r *Ring) OwnerOfKey(key string) (id string, ok bool) {
	return r.Owner(r.PartitionOf(key))
}

// Owned returns the partitions owned by id in ascending order, or nil if it
// owns none.
func (r *Ring) Owned(id string) []int {
	m := r.MemberIndex(id)
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

// Load returns the number of partitions owned by id (0 if it is not a
// member).
func (r *Ring) Load(id string) int {
	m := r.MemberIndex(id)
	if m < 0 {
		return 0
	}
	return r.loads[m]
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

// Assignment returns a copy of the owner of every partition, indexed by
// partition; "" marks a partition nobody owns.
func (r *Ring) Assignment() []string {
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

// Change is what one member gains and loses between two rings. Both lists
// hold partitions in ascending order.
type Change struct {
	// Gained are the partitions the member owns in the new ring but not in
	// the old one.
	Gained []int
	// Lost are the partitions the member owns in the old ring but not in the
	// new one.
	Lost []int
}

// Diff returns, for every member whose partitions differ between from and to,
// what it gained and lost. Members whose partitions are the same are absent.
// A nil ring counts as a ring without members, with the other ring's
// partition count. Rings with different partition counts cannot be compared:
// the error wraps ErrRingMismatch.
func Diff(from, to *Ring) (map[string]Change, error) {
	out := make(map[string]Change)
	if from == nil && to == nil {
		return out, nil
	}
	if from != nil && to != nil && from.partitions != to.partitions {
		return nil, fmt.Errorf("%w: %d and %d", ErrRingMismatch, from.partitions, to.partitions)
	}
	p := max(from.Partitions(), to.Partitions())
	for part := range p {
		a, _ := from.Owner(part)
		b, _ := to.Owner(part)
		if a == b {
			continue
		}
		if a != "" {
			c := out[a]
			c.Lost = append(c.Lost, part)
			out[a] = c
		}
		if b != "" {
			c := out[b]
			c.Gained = append(c.Gained, part)
			out[b] = c
		}
	}
	return out, nil
}
