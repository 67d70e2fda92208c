package ring

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/testsupport"
)

// ringMember is a node as buraksezer/consistent sees it in these tests: the
// ID plus a NUL terminator, the naming Ring's own points use.
type ringMember string

func (m ringMember) String() string { return string(m) + "\x00" }

// rawMember is a node named by its bare ID, as consistent's documentation
// suggests; prefix IDs then share point keys.
type rawMember string

func (m rawMember) String() string { return string(m) }

// xxhasher is consistent's Hasher, xxhash64.
type xxhasher struct{}

func (xxhasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

func consistentConfig(cfg Config) consistent.Config {
	return consistent.Config{
		Hasher:            xxhasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: replicationFactor,
		Load:              cfg.LoadFactor,
	}
}

// newConsistent builds consistent's ring of ids (NUL-terminated names), and
// reports whether consistent.New panicked.
func newConsistent(ids []string, cfg Config) (c *consistent.Consistent, panicked bool) {
	defer func() {
		if recover() != nil {
			c, panicked = nil, true
		}
	}()
	ms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		ms[i] = ringMember(id)
	}
	return consistent.New(ms, consistentConfig(cfg)), false
}

// ceilBound is the bound every member's load must respect:
// ceil(load*P/N), at most P.
func ceilBound(cfg Config, n int) int {
	return int(math.Min(math.Ceil(cfg.LoadFactor*float64(cfg.Partitions)/float64(n)), float64(cfg.Partitions)))
}

// checkRing verifies every invariant of r, built from members under cfg.
func checkRing(t testing.TB, r *Ring, members []string, cfg Config) {
	t.Helper()
	p, n := cfg.Partitions, len(members)
	sorted := slices.Sorted(slices.Values(members))
	require.Equal(t, p, r.Partitions())
	require.Equal(t, cfg.LoadFactor, r.LoadFactor())
	require.True(t, slices.Equal(sorted, r.Members()), "members not sorted copy")
	require.Len(t, assignment(r), p)

	if n == 0 {
		require.Zero(t, maxCapacity(r))
		for part := range p {
			require.Equal(t, -1, ownerIndex(r, part))
			_, ok := r.Owner(part)
			require.False(t, ok)
		}
		return
	}
	bound := ceilBound(cfg, n)
	if cfg.algorithm() == AlgorithmWeighted {
		// Every weight 1 here: one partition above ceil(load*P/N), computed
		// exactly, at most P.
		q := new(big.Rat).Mul(new(big.Rat).SetFloat64(cfg.LoadFactor), big.NewRat(int64(p), int64(n)))
		c := new(big.Int).Quo(new(big.Int).Add(q.Num(), new(big.Int).Sub(q.Denom(), big.NewInt(1))), q.Denom())
		bound = p
		if c.IsInt64() && c.Int64() < int64(p) {
			bound = int(c.Int64()) + 1
		}
		if n*p <= 1<<16 {
			checkStable(t, r)
		}
	}
	require.LessOrEqual(t, maxCapacity(r), bound, "P=%d N=%d load=%v", p, n, cfg.LoadFactor)
	require.GreaterOrEqual(t, maxCapacity(r), (p+n-1)/n)

	loads := make([]int, n)
	owners := assignment(r)
	for part := range p {
		i := ownerIndex(r, part)
		if i < 0 || i >= n {
			t.Fatalf("partition %d has owner index %d (N=%d)", part, i, n)
		}
		if id, ok := r.Owner(part); !ok || id != sorted[i] || id != owners[part] {
			t.Fatalf("partition %d: Owner = %q, %v; OwnerIndex %d = %q; Assignment %q", part, id, ok, i, sorted[i], owners[part])
		}
		loads[i]++
	}
	total := 0
	for i, id := range sorted {
		require.Equal(t, i, r.memberIndex(id))
		require.Equal(t, loads[i], loadOf(r, id))
		require.LessOrEqual(t, loads[i], maxCapacity(r), "member %q", id)
		total += loads[i]
	}
	require.Equal(t, p, total)
	for _, id := range sorted[:min(n, 8)] {
		owned := r.Owned(id)
		require.Len(t, owned, loads[r.memberIndex(id)])
		require.True(t, slices.IsSorted(owned))
		for _, part := range owned {
			got, _ := r.Owner(part)
			require.Equal(t, id, got)
		}
	}
}

// randomIDs returns n distinct random valid node IDs (testsupport.RandomIDs).
func randomIDs(rng *rand.Rand, n int) []string { return testsupport.RandomIDs(rng, n) }

func shuffled(rng *rand.Rand, ids []string) []string {
	out := slices.Clone(ids)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestRingConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want error
		msg  string
	}{
		{"default", DefaultConfig(), nil, ""},
		{"one partition", Config{Partitions: 1, LoadFactor: 1}, nil, ""},
		{"max partitions", Config{Partitions: MaxPartitions, LoadFactor: 1.25}, nil, ""},
		{"load 1.0000001", Config{Partitions: 7, LoadFactor: 1.0000001}, nil, ""},
		{"load 1e9", Config{Partitions: 7, LoadFactor: 1e9}, nil, ""},
		{"zero config", Config{}, ErrInvalidPartitions, "0"},
		{"zero partitions", Config{Partitions: 0, LoadFactor: 1.25}, ErrInvalidPartitions, "0"},
		{"negative partitions", Config{Partitions: -5, LoadFactor: 1.25}, ErrInvalidPartitions, "-5"},
		{"too many partitions", Config{Partitions: MaxPartitions + 1, LoadFactor: 1.25}, ErrInvalidPartitions, strconv.Itoa(MaxPartitions + 1)},
		{"zero load", Config{Partitions: 8}, ErrInvalidLoadFactor, "0"},
		{"load below 1", Config{Partitions: 8, LoadFactor: 0.999}, ErrInvalidLoadFactor, "0.999"},
		{"negative load", Config{Partitions: 8, LoadFactor: -2}, ErrInvalidLoadFactor, "-2"},
		{"NaN load", Config{Partitions: 8, LoadFactor: math.NaN()}, ErrInvalidLoadFactor, "NaN"},
		{"+Inf load", Config{Partitions: 8, LoadFactor: math.Inf(1)}, ErrInvalidLoadFactor, "+Inf"},
		{"-Inf load", Config{Partitions: 8, LoadFactor: math.Inf(-1)}, ErrInvalidLoadFactor, "-Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.Contains(t, err.Error(), tt.msg)
			require.True(t, strings.HasPrefix(err.Error(), "ring: "), err.Error())

			_, err = New([]string{"a"}, tt.cfg)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestRingValidateNodeID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"node-1", true},
		{"a", true},
		{"10.0.0.7:8080", true},
		{"pod-7f9c@eu-west-1", true},
		{"ñodo-ß-日本-🙂", true},
		{strings.Repeat("x", MaxNodeIDLen), true},
		{"", false},
		{strings.Repeat("x", MaxNodeIDLen+1), false},
		{"a/b", false},
		{"/", false},
		{"a b", false},
		{" a", false},
		{"a\tb", false},
		{"a\nb", false},
		{"a\x00b", false},
		{"\x00", false},
		{"a\x7fb", false},         // DEL
		{"a\u00a0b", false},       // no-break space
		{"a\u200bb", false},       // zero-width space (format character)
		{"a\u2028b", false},       // line separator
		{"\xff\xfe", false},       // not UTF-8
		{"node-\xc3", false},      // truncated UTF-8
		{"a\U0010fffeb", false},   // noncharacter, unassigned
		{"\u202eevil", false},     // bidi override (format character)
		{"x\u0300", true},         // combining mark is printable
		{"\u00ad", false},         // soft hyphen (format character)
		{"tab\u0009end", false},   // tab
		{"cr\u000dend", false},    // carriage return
		{"esc\u001bend", false},   // escape
		{"c1\u0085end", false},    // next line (C1 control)
		{"ideo\u3000sp", false},   // ideographic space
		{"🙂/🙂", false},            // slash between symbols
		{"key=value,x", true},     // punctuation is fine
		{"UPPER_lower.123", true}, // mixed
	}
	for _, tt := range tests {
		name := strconv.Quote(tt.id)
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(name, func(t *testing.T) {
			err := ValidateNodeID(tt.id)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidNodeID)
			require.True(t, strings.HasPrefix(err.Error(), "ring: invalid node ID"), err.Error())
			if tt.id != "" && len(tt.id) <= MaxNodeIDLen {
				require.Contains(t, err.Error(), strconv.Quote(tt.id))
			}
		})
	}
}

func TestNewRingBadInput(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		name    string
		members []string
		cfg     Config
		want    error
		msg     string
	}{
		{"empty ID", []string{"a", ""}, cfg, ErrInvalidNodeID, "empty"},
		{"NUL in ID", []string{"a", "b\x00c"}, cfg, ErrInvalidNodeID, `"b\x00c"`},
		{"slash in ID", []string{"x/y"}, cfg, ErrInvalidNodeID, `"x/y"`},
		{"space in ID", []string{"x y"}, cfg, ErrInvalidNodeID, `"x y"`},
		{"invalid UTF-8", []string{"ok", "\xff"}, cfg, ErrInvalidNodeID, `"\xff"`},
		{"long ID", []string{strings.Repeat("z", 1000)}, cfg, ErrInvalidNodeID, "1000 bytes"},
		{"duplicate", []string{"a", "b", "a"}, cfg, ErrDuplicateNodeID, `"a"`},
		{"duplicate among many", []string{"n1", "n11", "n", "n11"}, cfg, ErrDuplicateNodeID, `"n11"`},
		{"bad partitions", []string{"a"}, Config{Partitions: -1, LoadFactor: 2}, ErrInvalidPartitions, "-1"},
		{"bad load", []string{"a"}, Config{Partitions: 4, LoadFactor: 0.5}, ErrInvalidLoadFactor, "0.5"},
		{"bad config wins over bad ID", []string{""}, Config{Partitions: 0, LoadFactor: 2}, ErrInvalidPartitions, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.members, tt.cfg)
			require.Nil(t, r)
			require.ErrorIs(t, err, tt.want)
			require.Contains(t, err.Error(), tt.msg)
			for _, other := range []error{ErrInvalidNodeID, ErrDuplicateNodeID, ErrInvalidPartitions, ErrInvalidLoadFactor} {
				if other != tt.want {
					require.False(t, errors.Is(err, other), "%v is also %v", err, other)
				}
			}
		})
	}
}

func TestNewRingDoesNotKeepCallerSlice(t *testing.T) {
	members := []string{"c", "a", "b"}
	r, err := New(members, DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, []string{"c", "a", "b"}, members, "caller's slice reordered")
	members[0] = "zzz"
	require.Equal(t, []string{"a", "b", "c"}, r.Members())
	got := r.Members()
	got[0] = "changed"
	require.Equal(t, []string{"a", "b", "c"}, r.Members())
}

func TestRingEmpty(t *testing.T) {
	for _, members := range [][]string{nil, {}} {
		r, err := New(members, DefaultConfig())
		require.NoError(t, err)
		checkRing(t, r, members, DefaultConfig())
		require.Empty(t, r.Members())
		require.Equal(t, -1, ownerIndex(r, PartitionOf("k", r.Partitions())))
		_, ok := ownerOfKey(r, "k")
		require.False(t, ok)
		require.Nil(t, r.Owned("a"))
		require.Zero(t, loadOf(r, "a"))
		require.Equal(t, -1, r.memberIndex("a"))
		for _, o := range assignment(r) {
			require.Empty(t, o)
		}
	}
	a, _ := New(nil, DefaultConfig())
	b, _ := New([]string{}, DefaultConfig())
	require.Equal(t, a.Version(), b.Version())
}

func TestRingNil(t *testing.T) {
	var r *Ring
	require.Zero(t, r.Partitions())
	require.Zero(t, r.LoadFactor())
	require.Zero(t, maxCapacity(r))
	require.Nil(t, r.Members())
	require.Equal(t, -1, r.memberIndex("a"))
	require.Equal(t, -1, PartitionOf("k", r.Partitions()))
	require.Equal(t, -1, ownerIndex(r, 0))
	_, ok := r.Owner(0)
	require.False(t, ok)
	_, ok = ownerOfKey(r, "k")
	require.False(t, ok)
	require.Nil(t, r.Owned("a"))
	require.Zero(t, loadOf(r, "a"))
	require.Zero(t, r.Version())
	require.Nil(t, assignment(r))
}

func TestRingLookup(t *testing.T) {
	members := []string{"node-3", "node-1", "node-2"}
	r, err := New(members, DefaultConfig())
	require.NoError(t, err)
	checkRing(t, r, members, DefaultConfig())

	for _, p := range []int{-1, math.MinInt, r.Partitions(), r.Partitions() + 1, math.MaxInt} {
		require.Equal(t, -1, ownerIndex(r, p), "partition %d", p)
		_, ok := r.Owner(p)
		require.False(t, ok)
	}
	for i := range 1000 {
		key := "user:" + strconv.Itoa(i)
		p := PartitionOf(key, r.Partitions())
		require.Equal(t, int(xxhash.Sum64String(key)%uint64(r.Partitions())), p)
		want, _ := r.Owner(p)
		got, ok := ownerOfKey(r, key)
		require.True(t, ok)
		require.Equal(t, want, got)
		require.Equal(t, r.memberIndex(got), ownerIndex(r, p))
	}
	require.Equal(t, -1, r.memberIndex("node-4"))
	require.Nil(t, r.Owned("node-4"))
	require.Zero(t, loadOf(r, "node-4"))
}

func TestRingLookupDoesNotAllocate(t *testing.T) {
	r, err := New([]string{"a", "b", "c", "d"}, DefaultConfig())
	require.NoError(t, err)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := keys[i%len(keys)]
		i++
		_ = ownerIndex(r, PartitionOf(k, r.Partitions()))
		_, _ = ownerOfKey(r, k)
		_, _ = r.Owner(i % 1024)
	})
	require.Zero(t, allocs)
}

func TestRingConcurrentReads(t *testing.T) {
	r, err := New([]string{"a", "b", "c"}, DefaultConfig())
	require.NoError(t, err)
	want := assignment(r)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				key := strconv.Itoa(g*10000 + i)
				id, ok := ownerOfKey(r, key)
				if !ok || id != want[PartitionOf(key, r.Partitions())] {
					t.Errorf("key %q: got %q, %v", key, id, ok)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRingVersion(t *testing.T) {
	cfg := DefaultConfig()
	v := func(members []string, cfg Config) uint64 {
		t.Helper()
		r, err := New(members, cfg)
		require.NoError(t, err)
		return r.Version()
	}
	base := v([]string{"a", "b", "c"}, cfg)
	require.Equal(t, base, v([]string{"c", "a", "b"}, cfg))
	require.Equal(t, base, v([]string{"b", "c", "a"}, cfg))

	distinct := map[uint64]string{base: "a,b,c"}
	add := func(name string, ver uint64) {
		t.Helper()
		prev, dup := distinct[ver]
		require.False(t, dup, "%s has the same version as %s", name, prev)
		distinct[ver] = name
	}
	add("a,b", v([]string{"a", "b"}, cfg))
	add("a,b,c,d", v([]string{"a", "b", "c", "d"}, cfg))
	add("empty", v(nil, cfg))
	add("P=1023", v([]string{"a", "b", "c"}, Config{Partitions: 1023, LoadFactor: 1.25}))
	add("load=1.2500001", v([]string{"a", "b", "c"}, Config{Partitions: 1024, LoadFactor: 1.2500001}))
	// Length prefixes keep concatenations apart.
	add("ab,c", v([]string{"ab", "c"}, cfg))
	add("a,bc", v([]string{"a", "bc"}, cfg))
	add("abc", v([]string{"abc"}, cfg))
}

// TestRingConsistentPanics pins down when buraksezer/consistent v0.10.0's New
// panics: exactly when its capacity n*ceil(floor(p/n)*load) is below p, and
// for a non-nil empty member list. Ring must build, and be valid, in every
// one of those cases.
func TestRingConsistentPanics(t *testing.T) {
	named := []struct {
		name  string
		p, n  int
		load  float64
		panic bool
	}{
		{"more members than partitions", 4, 5, 1.25, true},
		{"more members than partitions, huge load", 4, 5, 1e9, true},
		{"one partition two members", 1, 2, 1.25, true},
		{"load 1, n does not divide p", 1024, 3, 1, true},
		{"load 1, 7 partitions 4 members", 7, 4, 1, true},
		{"load 1.0000001 rounds up", 1024, 3, 1.0000001, false},
		{"load 1, n divides p", 1024, 4, 1, false},
		{"default, 16 members", 1024, 16, 1.25, false},
		{"as many members as partitions", 64, 64, 1.25, false},
		{"one member more than partitions", 64, 65, 1.25, true},
		{"5 partitions 3 members load 1.25", 5, 3, 1.25, false},
		{"10 partitions 6 members load 1.5", 10, 6, 1.5, false},
		{"10 partitions 6 members load 1", 10, 6, 1, true},
		{"10 partitions 6 members load 7.3", 10, 6, 7.3, false},
		{"load 1e9", 1024, 16, 1e9, false},
	}
	for _, tt := range named {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Partitions: tt.p, LoadFactor: tt.load, Algorithm: AlgorithmBounded}
			ids := make([]string, tt.n)
			for i := range ids {
				ids[i] = "node-" + strconv.Itoa(i)
			}
			_, panicked := newConsistent(ids, cfg)
			require.Equal(t, tt.panic, panicked)
			require.Equal(t, !tt.panic, consistentCapacity(tt.p, tt.n, tt.load)*float64(tt.n) >= float64(tt.p))
			r, err := New(ids, cfg)
			require.NoError(t, err)
			checkRing(t, r, ids, cfg)
		})
	}

	t.Run("empty non-nil member list", func(t *testing.T) {
		cfg := boundedConfig(DefaultConfig())
		_, panicked := newConsistent([]string{}, cfg)
		require.True(t, panicked)
		r, err := New([]string{}, cfg)
		require.NoError(t, err)
		checkRing(t, r, nil, cfg)
	})

	t.Run("grid", func(t *testing.T) {
		// consistent.New is quadratic in the member count; keep the grid small.
		loads := []float64{1, 1.1, 1.25, 2}
		checked := 0
		for p := 1; p <= 12; p++ {
			for n := 1; n <= 13; n++ {
				for _, load := range loads {
					ids := make([]string, n)
					for i := range ids {
						ids[i] = "n" + strings.Repeat("1", i) // prefix family
					}
					cfg := Config{Partitions: p, LoadFactor: load}
					_, panicked := newConsistent(ids, cfg)
					short := consistentCapacity(p, n, load)*float64(n) < float64(p)
					require.Equal(t, short, panicked, "P=%d N=%d load=%v", p, n, load)
					checked++
				}
			}
		}
		t.Logf("consistent panics exactly when its capacity is short in all %d configurations", checked)
	})
}

// TestRingMatchesConsistent holds Ring to buraksezer/consistent: wherever
// consistent.New works, its assignment (members named ID+NUL) is Ring's.
func TestRingMatchesConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	loads := []float64{1, 1.0000001, 1.1, 1.25, 1.5, 2, 7.3, 1e9}
	compared := 0
	for iter := 0; compared < 150 && iter < 1000; iter++ {
		n := 1 + rng.IntN(24)
		if iter%10 == 0 {
			n = 1 + rng.IntN(120)
		}
		cfg := Config{Partitions: 1 + rng.IntN(2048), LoadFactor: loads[rng.IntN(len(loads))], Algorithm: AlgorithmBounded}
		if iter%3 == 0 {
			cfg.LoadFactor = 1 + 3*rng.Float64()
		}
		ids := randomIDs(rng, n)
		if capacity(cfg.Partitions, n, cfg.LoadFactor) != int(math.Min(consistentCapacity(cfg.Partitions, n, cfg.LoadFactor), float64(cfg.Partitions))) {
			continue // consistent would panic, or its float rounding exceeds ceil(load*P/N)
		}
		r, err := New(ids, cfg)
		require.NoError(t, err)
		c, panicked := newConsistent(shuffled(rng, ids), cfg)
		require.False(t, panicked, "P=%d N=%d load=%v", cfg.Partitions, n, cfg.LoadFactor)
		for part := range cfg.Partitions {
			id, _ := r.Owner(part)
			require.Equal(t, id+"\x00", c.GetPartitionOwner(part).String(), "partition %d", part)
			require.Equal(t, c.FindPartitionID([]byte(strconv.Itoa(part))), PartitionOf(strconv.Itoa(part), r.Partitions()))
		}
		compared++
	}
	require.GreaterOrEqual(t, compared, 150)
}

// TestRingPrefixIDs shows what the NUL separator buys: with bare names,
// consistent's point keys for "node-1" (index 11) and "node-11" (index 1) are
// both "node-111", so a family of prefix IDs loses points and the assignment
// depends on the order members were added. Ring gives every member all its
// points, the same assignment in any order, and a balanced spread.
func TestRingPrefixIDs(t *testing.T) {
	families := map[string][]string{
		"node-1..node-12": {"node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7", "node-8", "node-9", "node-10", "node-11", "node-12"},
		"n, n1, n11, ...": {"n", "n1", "n11", "n111", "n1111", "n11111", "n111111", "n1111111"},
		"node-1, node-11": {"node-1", "node-11"},
		"a, a1, a10, a2":  {"a", "a1", "a10", "a2", "a20", "a3"},
	}
	cfg := boundedConfig(DefaultConfig())
	for name, ids := range families {
		t.Run(name, func(t *testing.T) {
			// consistent's raw keys collide.
			raw := make(map[string]bool)
			for _, id := range ids {
				for k := range replicationFactor {
					raw[fmt.Sprintf("%s%d", id, k)] = true
				}
			}
			require.Less(t, len(raw), len(ids)*replicationFactor, "expected bare-name point keys to collide")
			fwd := make([]consistent.Member, len(ids))
			rev := make([]consistent.Member, len(ids))
			for i, id := range ids {
				fwd[i] = rawMember(id)
				rev[len(ids)-1-i] = rawMember(id)
			}
			a, b := consistent.New(fwd, consistentConfig(cfg)), consistent.New(rev, consistentConfig(cfg))
			differ := 0
			for part := range cfg.Partitions {
				if a.GetPartitionOwner(part).String() != b.GetPartitionOwner(part).String() {
					differ++
				}
			}
			require.NotZero(t, differ, "bare names: expected insertion order to matter")
			t.Logf("bare names: %d distinct point keys of %d; %d of %d partitions depend on insertion order",
				len(raw), len(ids)*replicationFactor, differ, cfg.Partitions)

			// Ring: every member has all its points, order does not matter, spread is balanced.
			points := ringPoints(ids)
			perMember := make([]int, len(ids))
			for i, pt := range points {
				perMember[pt.member]++
				if i > 0 {
					require.NotEqual(t, points[i-1].hash, pt.hash)
				}
			}
			for _, c := range perMember {
				require.Equal(t, replicationFactor, c)
			}
			r1, err := New(ids, cfg)
			require.NoError(t, err)
			reversed := slices.Clone(ids)
			slices.Reverse(reversed)
			r2, err := New(reversed, cfg)
			require.NoError(t, err)
			checkRing(t, r1, ids, cfg)
			require.Equal(t, assignment(r1), assignment(r2))
			require.Equal(t, r1.Version(), r2.Version())
			fair := cfg.Partitions / len(ids)
			for _, id := range ids {
				require.GreaterOrEqual(t, loadOf(r1, id), fair/2, "%q owns %d partitions, fair share %d", id, loadOf(r1, id), fair)
			}
		})
	}
}

func TestRingCapacity(t *testing.T) {
	tests := []struct {
		p, n int
		load float64
		want int
		why  string
	}{
		{1024, 16, 1.25, 80, "consistent's capacity"},
		{1024, 3, 1.25, 427, "consistent's capacity ceil(341*1.25)"},
		{1000, 3, 1.25, 417, "consistent's capacity ceil(333*1.25) = ceil(1000*1.25/3)"},
		{1000, 7, 1.25, 178, "consistent's capacity ceil(142*1.25), below ceil(1000*1.25/7) = 179"},
		{1024, 3, 1, 342, "consistent's 341 leaves no room: ceil(1024/3)"},
		{10, 20, 1.25, 1, "more members than partitions: ceil(12.5/20)"},
		{10, 20, 1e9, 10, "huge load: at most P"},
		{150, 3, 1.1, 55, "consistent's float rounding gives ceil(50*1.1) = 56 > ceil(1.1*150/3)"},
	}
	for _, tt := range tests {
		got := capacity(tt.p, tt.n, tt.load)
		require.Equal(t, tt.want, got, "P=%d N=%d load=%v: %s", tt.p, tt.n, tt.load, tt.why)
		require.LessOrEqual(t, got, ceilBound(Config{Partitions: tt.p, LoadFactor: tt.load}, tt.n))
		require.GreaterOrEqual(t, got*tt.n, tt.p)
	}
	require.Equal(t, 56.0, consistentCapacity(150, 3, 1.1))
	require.Equal(t, 178.0, consistentCapacity(1000, 7, 1.25))
}

func TestRingEdgeCases(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "node-" + strconv.Itoa(i+1)
		}
		return out
	}
	tests := []struct {
		name string
		n    int
		cfg  Config
	}{
		{"one partition one member", 1, Config{Partitions: 1, LoadFactor: 1}},
		{"one partition five members", 5, Config{Partitions: 1, LoadFactor: 1.25}},
		{"as many members as partitions", 64, Config{Partitions: 64, LoadFactor: 1}},
		{"one member more than partitions", 65, Config{Partitions: 64, LoadFactor: 1}},
		{"2000 members 7 partitions", 2000, Config{Partitions: 7, LoadFactor: 1.25}},
		{"load exactly 1", 3, Config{Partitions: 1024, LoadFactor: 1}},
		{"load 1.0000001", 3, Config{Partitions: 1024, LoadFactor: 1.0000001}},
		{"load 7.3", 10, Config{Partitions: 1024, LoadFactor: 7.3}},
		{"load 1e9", 10, Config{Partitions: 1024, LoadFactor: 1e9}},
		{"load max float", 10, Config{Partitions: 1024, LoadFactor: math.MaxFloat64}},
		{"load 1e9, more members than partitions", 40, Config{Partitions: 16, LoadFactor: 1e9}},
		{"float rounding above ceil(load*P/N)", 3, Config{Partitions: 150, LoadFactor: 1.1}},
		{"max partitions", 3, Config{Partitions: MaxPartitions, LoadFactor: 1.25}},
	}
	for _, tt := range tests {
		for _, alg := range []Algorithm{AlgorithmBounded, AlgorithmWeighted} {
			tt.cfg.Algorithm = alg
			t.Run(tt.name+"/"+alg.String(), func(t *testing.T) {
				edgeCase(t, ids(tt.n), tt.cfg)
			})
		}
	}
}

// edgeCase checks the ring of members under cfg; under AlgorithmBounded,
// with more members than partitions and a capacity of 1, that P members
// own one partition each.
func edgeCase(t *testing.T, members []string, cfg Config) {
	t.Helper()
	r, err := New(members, cfg)
	require.NoError(t, err)
	checkRing(t, r, members, cfg)
	if cfg.Algorithm == AlgorithmBounded && len(members) > cfg.Partitions && ceilBound(cfg, len(members)) == 1 {
		owners := 0
		for _, id := range members {
			if loadOf(r, id) > 0 {
				owners++
			}
		}
		require.Equal(t, cfg.Partitions, owners, "with N > P and capacity 1, P members should own one partition each")
	}
}

// boundedConfig returns cfg under AlgorithmBounded.
func boundedConfig(cfg Config) Config {
	cfg.Algorithm = AlgorithmBounded
	return cfg
}

// TestRingProperties builds rings from random member sets, partition counts
// and load factors, by both algorithms: none may panic, every invariant
// holds, and the result does not depend on the order of the members.
func TestRingProperties(t *testing.T) {
	iterations := 300
	if testing.Short() {
		iterations = 60
	}
	rng := rand.New(rand.NewPCG(20260101, 7))
	special := []float64{1, 1.0000001, 1.25, 7.3, 10}
	for iter := range iterations {
		var n int
		switch x := rng.IntN(100); {
		case x < 5:
			n = 0
		case x < 70:
			n = 1 + rng.IntN(64)
		case x < 92:
			n = 65 + rng.IntN(436)
		default:
			n = 501 + rng.IntN(1500)
		}
		cfg := Config{Partitions: 1 + rng.IntN(4096), LoadFactor: 1 + 9*rng.Float64()}
		if rng.IntN(3) == 0 {
			cfg.LoadFactor = special[rng.IntN(len(special))]
		}
		if rng.IntN(5) == 0 {
			cfg.Partitions = 1 + rng.IntN(64)
		}
		cfg.Algorithm = AlgorithmBounded
		if iter%2 == 1 {
			cfg.Algorithm = AlgorithmWeighted
		}
		members := randomIDs(rng, n)
		r, err := New(members, cfg)
		require.NoError(t, err, "iteration %d", iter)
		checkRing(t, r, members, cfg)

		again, err := New(shuffled(rng, members), cfg)
		require.NoError(t, err)
		require.Equal(t, r.Version(), again.Version(), "iteration %d", iter)
		require.Equal(t, assignment(r), assignment(again), "iteration %d: assignment depends on member order", iter)
	}
}

// PartitionOf, for callers without a Ring, computes what every Ring does.
func TestPartitionOf(t *testing.T) {
	r, err := New([]string{"a", "b"}, Config{Partitions: 97, LoadFactor: 1.25})
	require.NoError(t, err)
	for i := range 1000 {
		key := fmt.Sprintf("key-%d", i)
		require.Equal(t, PartitionOf(key, r.Partitions()), PartitionOf(key, 97), key)
	}
	require.Equal(t, -1, PartitionOf("k", 0))
	require.Equal(t, -1, PartitionOf("k", -5))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = PartitionOf("some-key", 97) }))
}
