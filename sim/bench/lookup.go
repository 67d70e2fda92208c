package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
)

// lookupMembers and lookupKeys size the lookup comparison: 16 members, the
// default 1024 partitions, 4096 distinct keys.
const (
	lookupMembers = 16
	lookupKeys    = 4096 // a power of two: index with & (lookupKeys-1)
	// consistentReplicas is ownership's (and consistent's usual)
	// replication factor: points per member.
	consistentReplicas = 40
	// groupcacheReplicas is the virtual nodes per member of the
	// groupcache-style ring (groupcache's own default is 50).
	groupcacheReplicas = 50
)

// ringMember is a consistent.Member named by a node ID plus NUL, as
// ownership names them, so that the assignments agree.
type ringMember string

func (m ringMember) String() string { return string(m) + "\x00" }

// xxhasher is consistent's Hasher, xxhash64.
type xxhasher struct{}

func (xxhasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// hashRing is the groupcache-style baseline: a sorted slice of virtual-node
// hashes (replicas per member), each with its member, and a binary search
// per key (groupcache/consistenthash, with xxhash instead of crc32 and the
// virtual-node key built with a separator).
type hashRing struct {
	hashes []uint64
	owners []string // owners[i] holds hashes[i]
}

func newHashRing(members []string, replicas int) *hashRing {
	type point struct {
		h     uint64
		owner string
	}
	pts := make([]point, 0, len(members)*replicas)
	for _, m := range members {
		for i := range replicas {
			pts = append(pts, point{xxhash.Sum64String(m + "\x00" + strconv.Itoa(i)), m})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return 0
	})
	r := &hashRing{hashes: make([]uint64, len(pts)), owners: make([]string, len(pts))}
	for i, p := range pts {
		r.hashes[i], r.owners[i] = p.h, p.owner
	}
	return r
}

// get returns the owner of key: the first point at or after its hash.
func (r *hashRing) get(key string) string {
	h := xxhash.Sum64String(key)
	i, _ := slices.BinarySearch(r.hashes, h)
	if i == len(r.hashes) {
		i = 0
	}
	return r.owners[i]
}

var sink int

func runLookup(ctx context.Context, e *env) ([]Section, error) {
	cfg := e.cfg
	rc := ring.DefaultConfig()
	rc.Algorithm = ring.AlgorithmBounded // consistent's algorithm: both name the same owner of every key
	members := make([]string, lookupMembers)
	cms := make([]consistent.Member, lookupMembers)
	for i := range members {
		members[i] = "node-" + strconv.Itoa(i+1)
		cms[i] = ringMember(members[i])
	}
	rg, err := ring.New(members, rc)
	if err != nil {
		return nil, err
	}
	cons := consistent.New(cms, consistent.Config{Hasher: xxhasher{}, PartitionCount: rc.Partitions, ReplicationFactor: consistentReplicas, Load: rc.LoadFactor})
	gc := newHashRing(members, groupcacheReplicas)
	keys := make([]string, lookupKeys)
	bkeys := make([][]byte, lookupKeys)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i*7919) + "/order"
		bkeys[i] = []byte(keys[i])
		id, _ := rg.Owner(ring.PartitionOf(keys[i], rg.Partitions()))
		if got := cons.LocateKey(bkeys[i]).String(); got != id+"\x00" {
			return nil, fmt.Errorf("key %q: consistent says %q, ring says %q", keys[i], got, id)
		}
	}

	// A live node: one member of a 1-member etcd, serving every partition.
	cli, err := e.client(ctx, 1)
	if err != nil {
		return nil, err
	}
	ncfg := ownership.DefaultConfig()
	ncfg.Cluster = e.name("bench-lookup")
	ncfg.NodeID = "a"
	node, err := ownership.Join(ctx, cli, ncfg)
	if err != nil {
		return nil, err
	}
	defer node.Close(context.Background())
	if err := waitServing(ctx, rc.Partitions, node); err != nil {
		return nil, err
	}

	parts := uint64(rc.Partitions)
	ops := []struct {
		name string
		op   func(i int) int
	}{
		{"tenure `Ring` (PartitionOf + owner table)", func(i int) int {
			id, _ := rg.Owner(ring.PartitionOf(keys[i&(lookupKeys-1)], rc.Partitions))
			return len(id)
		}},
		{"tenure `Node.Lookup` (route: owner, address, epoch)", func(i int) int { return node.Lookup(keys[i&(lookupKeys-1)]).Partition }},
		{"buraksezer/consistent `LocateKey`", func(i int) int { return len(cons.LocateKey(bkeys[i&(lookupKeys-1)]).String()) }},
		{"groupcache-style ring (50 virtual nodes per member)", func(i int) int { return len(gc.get(keys[i&(lookupKeys-1)])) }},
		{"bare xxhash of the key mod P (the limit)", func(i int) int { return int(xxhash.Sum64String(keys[i&(lookupKeys-1)]) % parts) }},
	}
	n := cfg.scaled(1<<21, 1<<16)
	cands := make([]candidate, len(ops))
	for j, o := range ops {
		cands[j] = candidate{name: o.name, run: func(context.Context) (float64, error) {
			s := 0
			start := time.Now()
			for i := range n {
				s += o.op(i)
			}
			d := time.Since(start)
			sink += s
			return float64(d.Nanoseconds()) / float64(n), nil
		}}
	}
	samples, err := interleave(ctx, cfg.rounds()*2, cands)
	if err != nil {
		return nil, err
	}
	rows := rowsFrom(cands, samples, 0)
	for j, o := range ops {
		rows[j].Allocs = allocsPerOp(4096, o.op)
	}
	return []Section{{
		Key:   "lookup",
		Title: "Key -> owner lookup",
		Intro: fmt.Sprintf("%d members, %d partitions, load factor %.2f, %d distinct keys, one goroutine; %d lookups per round, %d rounds interleaved. `Node.Lookup` runs on a live node (1-member etcd) and returns the whole route.",
			lookupMembers, rc.Partitions, rc.LoadFactor, lookupKeys, n, cfg.rounds()*2),
		Unit: "ns/op",
		Rows: rows,
		Notes: []string{
			"consistent takes a read lock and a map lookup per key and returns an interface; the groupcache-style ring is a binary search over 800 points (owners in a parallel slice, its best case); tenure hashes the key to a partition and reads a slice.",
		},
	}}, nil
}

// allocsPerOp returns the mean heap allocations of op over n calls.
func allocsPerOp(n int, op func(int) int) float64 {
	op(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := 0
	for i := range n {
		s += op(i)
	}
	runtime.ReadMemStats(&after)
	sink += s
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

// waitServing waits until the nodes together serve all parts partitions.
func waitServing(ctx context.Context, parts int, nodes ...*ownership.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		n := 0
		ready := true
		for _, nd := range nodes {
			n += len(nd.Owned())
			ready = ready && nd.Status().Ready
		}
		if n == parts && ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: %d of %d partitions served: %w", n, parts, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
