package etcdfence_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestCommitStaleNeighbours: a stale write inside a batch is refused and
// its neighbours, in the same transaction, commit.
func TestCommitStaleNeighbours(t *testing.T) {
	ctx, cli, s := setup(t, "neighbours")
	old := fence.Token{Scope: "p/1", Epoch: 5}
	cur := fence.Token{Scope: "p/1", Epoch: 9}
	next := fence.Token{Scope: "p/1", Epoch: 11}
	other := fence.Token{Scope: "p/2", Epoch: 1}
	require.NoError(t, s.Advance(ctx, cur))
	_, err := s.Put(ctx, cur, "cas", []byte("v1"))
	require.NoError(t, err)
	_, err = s.Put(ctx, cur, "gone", []byte("x"))
	require.NoError(t, err)

	res, err := s.Commit(ctx, []etcdfence.Write{
		{Kind: etcdfence.KindPut, Token: cur, Key: "a", Value: []byte("cur")},
		{Kind: etcdfence.KindPut, Token: old, Key: "b", Value: []byte("stale")},
		{Kind: etcdfence.KindPut, Token: other, Key: "c", Value: []byte("other scope")},
		{Kind: etcdfence.KindCompareAndSwap, Token: cur, Key: "cas", Version: 1, Value: []byte("v2")},
		{Kind: etcdfence.KindCompareAndSwap, Token: next, Key: "cas2", Version: 3, Value: []byte("wrong version")},
		{Kind: etcdfence.KindDelete, Token: old, Key: "gone"},
		{Kind: etcdfence.KindDelete, Token: cur, Key: "missing"},
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1"}, Key: "invalid"},
		{Kind: etcdfence.KindPut, Token: next, Key: "d", Value: []byte("next")},
	})
	require.NoError(t, err)
	require.Len(t, res, 9)
	rev := res[0].Revision
	require.Positive(t, rev)
	for _, i := range []int{0, 2, 3, 6, 8} {
		require.NoError(t, res[i].Err, "write %d", i)
		require.Equal(t, rev, res[i].Revision, "write %d shares the transaction", i)
	}
	fencetest.RequireStale(t, res[1].Err, "p/1", 5, 9)
	fencetest.RequireStale(t, res[5].Err, "p/1", 5, 9)
	require.Zero(t, res[1].Revision)
	var ve *etcdfence.VersionError
	require.ErrorAs(t, res[4].Err, &ve)
	require.Equal(t, int64(0), ve.Actual)
	require.False(t, res[6].Deleted)
	require.ErrorIs(t, res[7].Err, fence.ErrInvalidToken)

	got := dump(t, cli, etcdfence.DataPrefix(s))
	require.Equal(t, map[string]string{
		"a": "cur#v1", "c": "other scope#v1", "cas": "v2#v2", "d": "next#v1", "gone": "x#v1",
	}, got)
	floor, err := s.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(11), floor, "the floor rises to the newest admitted epoch of the batch")

	// A batch in which every write of a scope is stale leaves its floor.
	res, err = s.Commit(ctx, []etcdfence.Write{
		{Kind: etcdfence.KindPut, Token: old, Key: "x"}, {Kind: etcdfence.KindPut, Token: cur, Key: "y"}, {Kind: etcdfence.KindPut, Token: other, Key: "z"},
	})
	require.NoError(t, err)
	fencetest.RequireStale(t, res[0].Err, "p/1", 5, 11)
	fencetest.RequireStale(t, res[1].Err, "p/1", 9, 11)
	require.NoError(t, res[2].Err)
	floor, err = s.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(11), floor)
}

// TestStaleCache: a Store's remembered floors go out of date when another
// process moves them; its writes are still judged by etcd.
func TestStaleCache(t *testing.T) {
	c := cluster.New(t, 1)
	ctx := fencetest.Context(t)
	s1 := newStore(t, c.NewClient(t), "cache")
	s2 := newStore(t, c.NewClient(t), "cache")

	// s1 saw no floor for p/1; s2 then creates it.
	f, err := s1.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Zero(t, f)
	require.NoError(t, s2.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 5}))
	res, err := s1.Commit(ctx, []etcdfence.Write{
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1", Epoch: 5}, Key: "k1", Value: []byte("a")},
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1", Epoch: 4}, Key: "k2", Value: []byte("b")},
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/2", Epoch: 1}, Key: "k3", Value: []byte("c")},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	fencetest.RequireStale(t, res[1].Err, "p/1", 4, 5)
	require.NoError(t, res[2].Err)

	// s1 remembers 5; s2 raises to 6; s1 writes at 5 (refused by etcd) and
	// at 7 (admitted, and the floor rises to 7).
	require.NoError(t, s2.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 6}))
	_, err = s1.Put(ctx, fence.Token{Scope: "p/1", Epoch: 5}, "k1", []byte("zombie"))
	fencetest.RequireStale(t, err, "p/1", 5, 6)
	_, err = s1.Put(ctx, fence.Token{Scope: "p/1", Epoch: 7}, "k1", []byte("new"))
	require.NoError(t, err)
	f, err = s2.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(7), f)

	// The floor key is deleted behind s1's back (never do this): s1 finds
	// out and writes again, recreating it.
	_, err = c.NewClient(t).Delete(ctx, etcdfence.FloorKey(s1, "p/1"))
	require.NoError(t, err)
	res, err = s1.Commit(ctx, []etcdfence.Write{
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1", Epoch: 7}, Key: "k4"},
		{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1", Epoch: 8}, Key: "k5"},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	f, err = s2.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(8), f)
	got := dump(t, c.NewClient(t), etcdfence.DataPrefix(s1))
	require.Equal(t, map[string]string{"k1": "new#v2", "k3": "c#v1", "k4": "#v1", "k5": "#v1"}, got)
}

// TestCommitLimits: batches far beyond one transaction, with many scopes,
// compare-and-swaps (which nest deepest) and repeated keys, are split so
// that the real etcd server accepts every transaction, at the default
// limit of 128 ops and at a small one; repeated keys keep their order.
func TestCommitLimits(t *testing.T) {
	cli := startCluster(t)
	ctx := fencetest.Context(t)
	for _, maxOps := range []int{0, 3, 4, 9} {
		t.Run(fmt.Sprint("maxops=", maxOps), func(t *testing.T) {
			cfg := etcdfence.DefaultConfig()
			cfg.Prefix = fmt.Sprintf("/test/limits%d/data/", maxOps)
			cfg.ClusterPrefix = fmt.Sprintf("/test/limits%d/", maxOps)
			cfg.MaxTxnOps = maxOps
			s, err := etcdfence.New(cli, cfg)
			require.NoError(t, err)
			var writes []etcdfence.Write
			want := map[string]string{}
			for i := range 300 {
				tok := fence.Token{Scope: fence.PartitionScope(i % 37), Epoch: 1}
				key := fmt.Sprintf("k%d", i%250) // keys 0..49 written twice
				switch {
				case i%5 == 0:
					writes = append(writes, etcdfence.Write{Kind: etcdfence.KindCompareAndSwap, Token: tok, Key: fmt.Sprintf("cas%d", i), Version: 0, Value: []byte("c")})
					want[fmt.Sprintf("cas%d", i)] = "c#v1"
				default:
					writes = append(writes, etcdfence.Write{Kind: etcdfence.KindPut, Token: tok, Key: key, Value: []byte(fmt.Sprint(i))})
					v := 1
					if i >= 250 {
						v = 2
					}
					want[key] = fmt.Sprintf("%d#v%d", i, v)
				}
			}
			res, err := s.Commit(ctx, writes)
			require.NoError(t, err)
			revs := map[int64]int{}
			for i, r := range res {
				require.NoError(t, r.Err, "write %d", i)
				revs[r.Revision]++
			}
			t.Logf("300 writes in %d transactions", len(revs))
			require.Equal(t, want, dump(t, cli, cfg.Prefix))
		})
	}
}

// TestCommitExactLimit fills transactions to exactly etcd's default of
// 128 ops as the server counts them: the server accepts them, and one more
// write starts a new transaction.
func TestCommitExactLimit(t *testing.T) {
	ctx, _, s := setup(t, "exact")
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	for _, c := range []struct {
		kind etcdfence.WriteKind
		fit  int // writes of one scope that fill 128 ops
	}{
		{etcdfence.KindPut, 127},            // 127 writes + 1 floor write
		{etcdfence.KindCompareAndSwap, 127}, // the same, and 128 checks in If: 1 floor, 127 versions
	} {
		for _, n := range []int{c.fit, c.fit + 1} {
			var writes []etcdfence.Write
			for i := range n {
				key := fmt.Sprintf("%s-%d/%d", c.kind, n, i)
				if c.kind == etcdfence.KindPut {
					writes = append(writes, etcdfence.Write{Kind: etcdfence.KindPut, Token: tok, Key: key, Value: []byte("v")})
				} else {
					writes = append(writes, etcdfence.Write{Kind: etcdfence.KindCompareAndSwap, Token: tok, Key: key, Version: 0, Value: []byte("v")})
				}
			}
			res, err := s.Commit(ctx, writes)
			require.NoError(t, err, "%s x %d", c.kind, n)
			revs := map[int64]bool{}
			for _, r := range res {
				require.NoError(t, r.Err)
				revs[r.Revision] = true
			}
			want := 1
			if n > c.fit {
				want = 2
			}
			require.Len(t, revs, want, "%s x %d: transactions", c.kind, n)
		}
	}
}

// TestGroupCommitMatchesSingles: 16 writers run the same scripts once with
// single fenced writes and once through a Batcher (coalescing or not);
// every result and the final contents are identical, and the batcher did
// batch. Besides its own keys, every writer puts a hot key that all share,
// under one of three tokens of two other scopes, one of them stale: Puts
// under one token are coalesced, the others wait their turn, and a stale
// group is refused next to its neighbours. Only the hot key's final value
// (whichever writer came last) and version (coalesced Puts count once) may
// differ.
func TestGroupCommitMatchesSingles(t *testing.T) {
	cli := startCluster(t)
	ctx := fencetest.Context(t)
	const writers, steps = 16, 40
	scripts := make([][]step, writers)
	for w := range writers {
		scripts[w] = script(w, steps)
	}

	single := newStore(t, cli, "singles")
	advanceHot(t, single)
	got1 := runScripts(ctx, single, single, scripts)
	hot1 := hotKey(t, cli, single)

	for _, noCoalesce := range []bool{false, true} {
		name := fmt.Sprint("grouped-nocoalesce=", noCoalesce)
		t.Run(name, func(t *testing.T) {
			grouped := newStore(t, cli, name)
			advanceHot(t, grouped)
			b, err := etcdfence.NewBatcher(grouped, etcdfence.BatcherConfig{NoCoalesce: noCoalesce})
			require.NoError(t, err)
			got2 := runScripts(ctx, grouped, b, scripts)
			b.Close()
			st := b.Stats()
			t.Logf("batcher: %+v", st)
			require.Less(t, st.Commits, st.Writes, "no batch held more than one write")
			if noCoalesce {
				require.Zero(t, st.Coalesced)
			}

			var stale, conflicts, hot int
			for w := range writers {
				for i := range got1[w] {
					require.Equal(t, got1[w][i], got2[w][i], "writer %d step %d (%+v)", w, i, scripts[w][i])
					switch {
					case got1[w][i].stale:
						stale++
					case got1[w][i].conflict:
						conflicts++
					}
					if scripts[w][i].scope != "" && got1[w][i].ok {
						hot++
					}
				}
			}
			require.Positive(t, stale)
			require.Positive(t, conflicts)
			require.Positive(t, hot)
			hot2 := hotKey(t, cli, grouped)
			require.Equal(t, dump(t, cli, etcdfence.DataPrefix(single)), dump(t, cli, etcdfence.DataPrefix(grouped)))
			require.Equal(t, floors(t, cli, single), floors(t, cli, grouped))
			require.Equal(t, int64(hot), hot1.Version, "every admitted Put to the hot key counts alone")
			require.LessOrEqual(t, hot2.Version, hot1.Version)
			if noCoalesce {
				require.Equal(t, hot1.Version, hot2.Version)
			}
			require.Regexp(t, `^\d+/\d+@(10|3)$`, string(hot2.Value), "an admitted Put wrote the hot key last")
		})
	}
}

// hotScopes are the scopes of the hot key's writes: the first at epoch 10
// (and a stale 8), the second at epoch 3.
var hotScopes = [2]string{fence.PartitionScope(100), fence.PartitionScope(101)}

// advanceHot advances the hot scopes of s, as their owners would.
func advanceHot(t *testing.T, s *etcdfence.Store) {
	t.Helper()
	ctx := fencetest.Context(t)
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: hotScopes[0], Epoch: 10}))
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: hotScopes[1], Epoch: 3}))
}

// hotKey returns the hot key of s and deletes it, so that the dumps of two
// runs compare equal.
func hotKey(t *testing.T, cli *clientv3.Client, s *etcdfence.Store) etcdfence.Item {
	t.Helper()
	ctx := fencetest.Context(t)
	it, err := s.Get(ctx, fence.Token{Scope: hotScopes[0], Epoch: 10}, "hot")
	require.NoError(t, err)
	require.True(t, it.Exists())
	_, err = cli.Delete(ctx, etcdfence.DataPrefix(s)+"hot")
	require.NoError(t, err)
	return it
}

type step struct {
	kind    etcdfence.WriteKind // "": Advance
	scope   string              // "": the writer's own
	epoch   int64
	key     string
	version int64
}

type outcome struct {
	ok       bool
	deleted  bool
	stale    bool
	current  int64
	conflict bool
	actual   int64
	other    string
}

// script is writer w's deterministic sequence of steps on its own scope:
// advances, current and stale epochs, puts, deletes and compare-and-swaps.
func script(w, n int) []step {
	rng := rand.New(rand.NewPCG(uint64(w), 99))
	epoch := int64(10)
	steps := make([]step, 0, n)
	for range n {
		e := epoch
		if rng.IntN(4) == 0 {
			e = epoch - 1 - int64(rng.IntN(3)) // a stale owner's write
		}
		key := fmt.Sprintf("w%d/k%d", w, rng.IntN(4))
		switch r := rng.IntN(13); {
		case r >= 10: // the shared hot key
			hot := step{kind: etcdfence.KindPut, scope: hotScopes[0], epoch: 10, key: "hot"}
			switch r {
			case 11:
				hot.epoch = 8 // stale
			case 12:
				hot.scope, hot.epoch = hotScopes[1], 3
			}
			steps = append(steps, hot)
		case r == 0:
			epoch += int64(1 + rng.IntN(2))
			steps = append(steps, step{epoch: epoch})
		case r < 6:
			steps = append(steps, step{kind: etcdfence.KindPut, epoch: e, key: key})
		case r < 8:
			steps = append(steps, step{kind: etcdfence.KindDelete, epoch: e, key: key})
		default:
			steps = append(steps, step{kind: etcdfence.KindCompareAndSwap, epoch: e, key: key, version: int64(rng.IntN(3))})
		}
	}
	return steps
}

func runScripts(ctx context.Context, s *etcdfence.Store, w writer, scripts [][]step) [][]outcome {
	out := make([][]outcome, len(scripts))
	var wg sync.WaitGroup
	for i, sc := range scripts {
		wg.Go(func() {
			for j, st := range sc {
				tok := fence.Token{Scope: cmp.Or(st.scope, fence.PartitionScope(i)), Epoch: st.epoch}
				val := []byte(fmt.Sprintf("%d/%d@%d", i, j, st.epoch))
				var err error
				var o outcome
				switch st.kind {
				case "":
					err = s.Advance(ctx, tok)
				case etcdfence.KindPut:
					_, err = w.Put(ctx, tok, st.key, val)
				case etcdfence.KindDelete:
					o.deleted, err = w.Delete(ctx, tok, st.key)
				case etcdfence.KindCompareAndSwap:
					_, err = w.CompareAndSwap(ctx, tok, st.key, st.version, val)
				}
				var se *fence.StaleError
				var ve *etcdfence.VersionError
				switch {
				case err == nil:
					o.ok = true
				case errors.As(err, &se):
					o.stale, o.current = true, se.Current
				case errors.As(err, &ve):
					o.conflict, o.actual = true, ve.Actual
				default:
					o.other = err.Error()
				}
				out[i] = append(out[i], o)
			}
		})
	}
	wg.Wait()
	return out
}

// TestCommitRepeatedKey: a batch small enough for one transaction that
// writes a key twice is split before the repeat (etcd refuses a
// transaction that writes a key twice), and the repeats apply in order,
// both among few writes (compared pairwise) and among many (through a map).
func TestCommitRepeatedKey(t *testing.T) {
	ctx, cli, s := setup(t, "repeated")
	for _, n := range []int{3, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tok := fence.Token{Scope: "p/1", Epoch: 1}
			var writes []etcdfence.Write
			for i := range n - 1 {
				writes = append(writes, etcdfence.Write{Kind: etcdfence.KindPut, Token: tok, Key: fmt.Sprintf("r%d/k%d", n, i), Value: []byte("first")})
			}
			writes = append(writes, etcdfence.Write{Kind: etcdfence.KindPut, Token: tok, Key: fmt.Sprintf("r%d/k0", n), Value: []byte("last")})
			res, err := s.Commit(ctx, writes)
			require.NoError(t, err)
			for i, r := range res {
				require.NoError(t, r.Err, "write %d", i)
			}
			require.Equal(t, res[0].Revision, res[n-2].Revision, "the distinct writes share a transaction")
			require.Greater(t, res[n-1].Revision, res[0].Revision, "the repeat goes in a later one")
			got := dump(t, cli, etcdfence.DataPrefix(s))
			require.Equal(t, "last#v2", got[fmt.Sprintf("r%d/k0", n)])
		})
	}
}
