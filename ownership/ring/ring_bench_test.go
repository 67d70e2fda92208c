package ring

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/buraksezer/consistent"
)

// lookupFixture is 16 members, the default configuration (1024 partitions,
// load 1.25) and 4096 pre-generated keys, built both as a Ring and as
// buraksezer/consistent with the same hasher, partition count, load factor
// and replication factor.
type lookupFixture struct {
	ring  *Ring
	c     *consistent.Consistent
	keys  []string
	bkeys [][]byte
}

const lookupKeys = 4096 // a power of two: index with & (lookupKeys-1)

func newLookupFixture(b *testing.B) *lookupFixture {
	b.Helper()
	cfg := boundedConfig(DefaultConfig()) // consistent's algorithm, to compare owners
	members := make([]string, 16)
	for i := range members {
		members[i] = "node-" + strconv.Itoa(i+1)
	}
	r, err := New(members, cfg)
	if err != nil {
		b.Fatal(err)
	}
	c, panicked := newConsistent(members, cfg)
	if panicked {
		b.Fatal("consistent.New panicked")
	}
	fx := &lookupFixture{ring: r, c: c, keys: make([]string, lookupKeys), bkeys: make([][]byte, lookupKeys)}
	for i := range fx.keys {
		fx.keys[i] = "tenant-" + strconv.Itoa(i*7919) + "/order"
		fx.bkeys[i] = []byte(fx.keys[i])
		id, _ := ownerOfKey(r, fx.keys[i])
		if got := c.LocateKey(fx.bkeys[i]).String(); got != id+"\x00" {
			b.Fatalf("key %q: consistent says %q, ring says %q", fx.keys[i], got, id)
		}
	}
	return fx
}

// BenchmarkLookup compares key -> owner on Ring with LocateKey on
// buraksezer/consistent over the same members and keys, on one goroutine.
func BenchmarkLookup(b *testing.B) {
	fx := newLookupFixture(b)
	r, keys, c, bkeys := fx.ring, fx.keys, fx.c, fx.bkeys
	b.Run("tenure", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ownerOfKey(r, keys[i&(lookupKeys-1)])
			i++
		}
	})
	b.Run("tenure-index", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ownerIndex(r, PartitionOf(keys[i&(lookupKeys-1)], r.Partitions()))
			i++
		}
	})
	b.Run("consistent", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c.LocateKey(bkeys[i&(lookupKeys-1)])
			i++
		}
	})
}

// BenchmarkLookupParallel is BenchmarkLookup from GOMAXPROCS goroutines
// (run with -cpu 1,2): Ring takes no lock, consistent takes a read lock per
// lookup.
func BenchmarkLookupParallel(b *testing.B) {
	fx := newLookupFixture(b)
	r, keys, c, bkeys := fx.ring, fx.keys, fx.c, fx.bkeys
	b.Run("tenure", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i, n := 0, 0
			for pb.Next() {
				if _, ok := ownerOfKey(r, keys[i&(lookupKeys-1)]); ok {
					n++
				}
				i++
			}
			runtime.KeepAlive(n)
		})
	})
	b.Run("consistent", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i, n := 0, 0
			for pb.Next() {
				if c.LocateKey(bkeys[i&(lookupKeys-1)]) != nil {
					n++
				}
				i++
			}
			runtime.KeepAlive(n)
		})
	})
}

// BenchmarkBuild builds rings of N members over P partitions by each
// algorithm, every member of weight 1 and with every 10th of weight 2:
// every node pays one build per membership change.
func BenchmarkBuild(b *testing.B) {
	for _, size := range []struct{ n, p int }{{10, 1024}, {50, 1024}, {1000, 4096}} {
		for _, heavy := range []bool{false, true} {
			ms := make([]Member, size.n)
			for i := range ms {
				ms[i] = Member{ID: "node-" + strconv.Itoa(i), Weight: 1}
				if heavy && i%10 == 0 {
					ms[i].Weight = 2
				}
			}
			for _, alg := range []Algorithm{AlgorithmBounded, AlgorithmWeighted} {
				if alg == AlgorithmBounded && heavy {
					continue // weights are ignored
				}
				name := strconv.Itoa(size.n) + "x" + strconv.Itoa(size.p) + "/" + alg.String()
				if heavy {
					name += "/heavy"
				}
				cfg := Config{Partitions: size.p, LoadFactor: 1.25, Algorithm: alg}
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := NewWeighted(ms, cfg); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
