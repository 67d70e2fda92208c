package ring

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRing builds rings from arbitrary member lists (one ID per line) and
// configurations, by AlgorithmWeighted for odd seeds and AlgorithmBounded for
// even ones. New must never panic; it either returns the error the
// input calls for or a ring for which every invariant holds, independent of
// member order.
func FuzzRing(f *testing.F) {
	f.Add("node-1\nnode-11\nnode-111", 1024, 1.25, uint64(1))
	f.Add("", 1024, 1.25, uint64(0))
	f.Add("a", 1, 1.0, uint64(0))
	f.Add("a\nb\nc", 1024, 1.0, uint64(2))
	f.Add("a\nb\nc\nd\ne", 3, 1.0, uint64(3))
	f.Add("n\nn1\nn11\nn111\nn1111\nn11111", 4096, 7.3, uint64(4))
	f.Add("a\nb\nc", 10, 1.0000001, uint64(5))
	f.Add("a\nb\nc", 7, 1e9, uint64(6))
	f.Add("x\ny\nz", 150, 1.1, uint64(7))
	f.Add("日本\nñ\n🙂\na:b@c", 64, 2.0, uint64(8))
	f.Add("a\na", 8, 1.25, uint64(9))
	f.Add("a\n\nb", 8, 1.25, uint64(10))
	f.Add("x/y", 8, 1.25, uint64(11))
	f.Add("a\x00b", 8, 1.25, uint64(12))
	f.Add("a b", 8, 1.25, uint64(13))
	f.Add("\xff", 8, 1.25, uint64(14))
	f.Add("a", 0, 1.25, uint64(15))
	f.Add("a", -3, 1.25, uint64(16))
	f.Add("a", MaxPartitions+1, 1.25, uint64(17))
	f.Add("a", 8, 0.5, uint64(18))
	f.Add("a", 8, math.NaN(), uint64(19))
	f.Add("a", 8, math.Inf(1), uint64(20))

	f.Fuzz(func(t *testing.T, list string, partitions int, load float64, seed uint64) {
		var members []string
		if list != "" {
			members = strings.Split(list, "\n")
		}
		cfg := Config{Partitions: partitions, LoadFactor: load, Algorithm: AlgorithmBounded}
		if seed&1 == 1 {
			cfg.Algorithm = AlgorithmWeighted
		}
		if cfg.Validate() == nil && cfg.Partitions > 4096 {
			// Valid but large: keep each input fast by folding P into
			// [1, 4096]. Large P itself is covered by TestRingEdgeCases.
			cfg.Partitions = 1 + cfg.Partitions%4096
		}

		// The error New must return, worked out independently.
		var want error
		seen := make(map[string]bool)
		switch {
		case cfg.Validate() != nil:
			want = cfg.Validate()
		default:
			for _, id := range members {
				if err := ValidateNodeID(id); err != nil {
					want = ErrInvalidNodeID
					break
				}
				if seen[id] && want == nil {
					want = ErrDuplicateNodeID
				}
				seen[id] = true
			}
		}
		for _, id := range members {
			if ValidateNodeID(id) == nil && (id == "" || len(id) > MaxNodeIDLen || !utf8.ValidString(id) ||
				strings.ContainsAny(id, "/\x00 \t\n\r")) {
				t.Fatalf("ValidateNodeID accepted %q", id)
			}
		}

		r, err := New(members, cfg)
		if want != nil {
			if r != nil || err == nil {
				t.Fatalf("New(%q, %+v) = ring, %v; want error %v", members, cfg, err, want)
			}
			if !errors.Is(err, ErrInvalidPartitions) && !errors.Is(err, ErrInvalidLoadFactor) &&
				!errors.Is(err, ErrInvalidNodeID) && !errors.Is(err, ErrDuplicateNodeID) {
				t.Fatalf("untyped error %v", err)
			}
			for _, sentinel := range []error{ErrInvalidPartitions, ErrInvalidLoadFactor, ErrInvalidNodeID, ErrDuplicateNodeID} {
				if errors.Is(want, sentinel) != errors.Is(err, sentinel) {
					t.Fatalf("got %v, want %v", err, want)
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("New(%q, %+v): %v", members, cfg, err)
		}
		checkRing(t, r, members, cfg)

		rng := rand.New(rand.NewPCG(seed, seed>>1))
		again, err := New(shuffled(rng, members), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if again.Version() != r.Version() {
			t.Fatalf("version depends on member order")
		}
		a, b := assignment(r), assignment(again)
		for p := range a {
			if a[p] != b[p] {
				t.Fatalf("partition %d: owner %q vs %q depending on member order", p, a[p], b[p])
			}
		}
	})
}
