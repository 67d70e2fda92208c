package etcdfence_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

func TestStoreOperations(t *testing.T) {
	ctx, cli, s := setup(t, "ops")
	tok := fence.Token{Scope: "p/1", Epoch: 10}

	floor, err := s.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Zero(t, floor, "no floor before the first write")

	it, err := s.Get(ctx, tok, "k")
	require.NoError(t, err)
	require.False(t, it.Exists())

	rev, err := s.Put(ctx, tok, "k", []byte("v1"))
	require.NoError(t, err)
	require.Positive(t, rev)
	floor, err = s.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(10), floor, "a write records its epoch")

	it, err = s.Get(ctx, tok, "k")
	require.NoError(t, err)
	require.Equal(t, etcdfence.Item{Key: "k", Value: []byte("v1"), Version: 1, CreateRevision: rev, ModRevision: rev}, it)

	// The data key lives under the prefix, the floor under the fence prefix.
	raw, err := cli.Get(ctx, "/test/ops/data/k")
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1)
	raw, err = cli.Get(ctx, etcdfence.FloorKey(s, "p/1"))
	require.NoError(t, err)
	require.Equal(t, "0000000000000000010", string(raw.Kvs[0].Value), "fixed-width floor")

	rev2, err := s.CompareAndSwap(ctx, tok, "k", 1, []byte("v2"))
	require.NoError(t, err)
	require.Greater(t, rev2, rev)
	_, err = s.CompareAndSwap(ctx, tok, "k", 1, []byte("v3"))
	var ve *etcdfence.VersionError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, etcdfence.ErrVersionMismatch)
	require.Equal(t, etcdfence.VersionError{Key: "k", Expected: 1, Actual: 2}, *ve)
	_, err = s.CompareAndSwap(ctx, tok, "new", 0, []byte("created"))
	require.NoError(t, err, "version 0 creates an absent key")
	_, err = s.CompareAndSwap(ctx, tok, "new", 0, []byte("again"))
	require.ErrorAs(t, err, &ve)
	require.Equal(t, int64(1), ve.Actual)

	deleted, err := s.Delete(ctx, tok, "k")
	require.NoError(t, err)
	require.True(t, deleted)
	deleted, err = s.Delete(ctx, tok, "k")
	require.NoError(t, err)
	require.False(t, deleted)

	// Advance: raising, repeating and lowering.
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 12}))
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 12}), "advancing to the floor is a no-op")
	fencetest.RequireStale(t, s.Advance(ctx, tok), "p/1", 10, 12)
	var fencer fence.Fencer = s // a Store is a fence.Fencer
	fencetest.RequireStale(t, fencer.Advance(ctx, tok), "p/1", 10, 12)
	_, err = s.Get(ctx, tok, "new")
	fencetest.RequireStale(t, err, "p/1", 10, 12)
	floor, err = s.Floor(ctx, "p/1")
	require.NoError(t, err)
	require.Equal(t, int64(12), floor)

	// Scopes are independent.
	_, err = s.Put(ctx, fence.Token{Scope: "p/2", Epoch: 1}, "other", []byte("x"))
	require.NoError(t, err)

	// Epochs near the top of int64 keep their order.
	big := fence.Token{Scope: "p/3", Epoch: 1<<63 - 2}
	require.NoError(t, s.Advance(ctx, big))
	fencetest.RequireStale(t, s.Advance(ctx, fence.Token{Scope: "p/3", Epoch: 999999999999999999}), "p/3", 999999999999999999, 1<<63-2)
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: "p/3", Epoch: 1<<63 - 1}))
}

func TestCorruptFloor(t *testing.T) {
	ctx, cli, s := setup(t, "corrupt")
	_, err := cli.Put(ctx, etcdfence.FloorKey(s, "p/1"), "zzz")
	require.NoError(t, err)
	_, err = s.Put(ctx, fence.Token{Scope: "p/1", Epoch: 5}, "k", nil)
	require.ErrorIs(t, err, etcdfence.ErrCorruptFloor)
	_, err = s.Floor(ctx, "p/1")
	require.ErrorIs(t, err, etcdfence.ErrCorruptFloor)
}

func TestClaimGuard(t *testing.T) {
	cli := startCluster(t)
	ctx := fencetest.Context(t)
	claim := "/test/guard/claims/7"
	old := fence.Token{Scope: fence.PartitionScope(7), Epoch: claimEpoch(t, cli, claim)}

	write := func(tok fence.Token, val string) error {
		_, err := etcdfence.ClaimGuarded(ctx, cli, claim, tok, clientv3.OpPut("/test/guard/data", val))
		return err
	}
	require.NoError(t, write(old, "old owner"))

	// The claim is lost and taken by a new owner.
	cur := fence.Token{Scope: old.Scope, Epoch: claimEpoch(t, cli, claim)}
	fencetest.RequireStale(t, write(old, "zombie"), old.Scope, old.Epoch, cur.Epoch)
	require.NoError(t, write(cur, "new owner"))

	// Handed over by its holder to the next owner: the claim rewritten in
	// place (its CreateRevision kept), its epoch the rewrite's ModRevision.
	put, err := cli.Put(ctx, claim, "next owner")
	require.NoError(t, err)
	next := fence.Token{Scope: old.Scope, Epoch: put.Header.Revision}
	fencetest.RequireStale(t, write(cur, "previous holder"), cur.Scope, cur.Epoch, next.Epoch)
	require.NoError(t, write(next, "new owner"))
	cur = next

	// A leadership key keeps its epoch, its CreateRevision, when its value
	// is rewritten (Proclaim).
	leader := "/test/guard/leader/x/1"
	lput, err := cli.Put(ctx, leader, "a")
	require.NoError(t, err)
	lt := fence.Token{Scope: fence.LeaderScope("x"), Epoch: lput.Header.Revision}
	_, err = cli.Put(ctx, leader, "a, proclaimed")
	require.NoError(t, err)
	_, err = etcdfence.ClaimGuarded(ctx, cli, leader, lt, clientv3.OpPut("/test/guard/leader-data", "v"))
	require.NoError(t, err, "the term's token after a Proclaim")

	// No claim at all: refused, current unknown.
	_, err = cli.Delete(ctx, claim)
	require.NoError(t, err)
	fencetest.RequireStale(t, write(cur, "orphan"), cur.Scope, cur.Epoch, 0)

	got, err := cli.Get(ctx, "/test/guard/data")
	require.NoError(t, err)
	require.Equal(t, "new owner", string(got.Kvs[0].Value))

	_, err = etcdfence.ClaimGuard(claim, fence.Token{Scope: "p/1"})
	require.ErrorIs(t, err, fence.ErrInvalidToken)
	_, err = etcdfence.ClaimGuard("", cur)
	require.ErrorIs(t, err, etcdfence.ErrInvalidKey)
	_, err = etcdfence.ClaimGuarded(ctx, nil, claim, cur)
	require.ErrorIs(t, err, etcdfence.ErrNilArgument)
}

func TestBadInput(t *testing.T) {
	ctx, cli, s := setup(t, "bad")
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	ok := fence.Token{Scope: "p/1", Epoch: 1}
	longKey := strings.Repeat("k", etcdfence.DefaultMaxKeyLen)
	bigValue := make([]byte, etcdfence.DefaultMaxValueLen+1)

	cases := []struct {
		name string
		w    etcdfence.Write
		want error
	}{
		{"empty scope", etcdfence.Write{Kind: etcdfence.KindPut, Token: fence.Token{Epoch: 1}, Key: "k"}, fence.ErrInvalidToken},
		{"zero epoch", etcdfence.Write{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p/1"}, Key: "k"}, fence.ErrInvalidToken},
		{"negative epoch", etcdfence.Write{Kind: etcdfence.KindDelete, Token: fence.Token{Scope: "p/1", Epoch: -4}, Key: "k"}, fence.ErrInvalidToken},
		{"scope with space", etcdfence.Write{Kind: etcdfence.KindPut, Token: fence.Token{Scope: "p 1", Epoch: 1}, Key: "k"}, fence.ErrInvalidToken},
		{"empty key", etcdfence.Write{Kind: etcdfence.KindPut, Token: ok, Key: ""}, etcdfence.ErrInvalidKey},
		{"oversize key", etcdfence.Write{Kind: etcdfence.KindPut, Token: ok, Key: longKey}, etcdfence.ErrInvalidKey},
		{"key inside fence prefix", etcdfence.Write{Kind: etcdfence.KindPut, Token: ok, Key: "../fence/p/1"}, nil}, // not a path: allowed
		{"oversize value", etcdfence.Write{Kind: etcdfence.KindPut, Token: ok, Key: "k", Value: bigValue}, etcdfence.ErrInvalidWrite},
		{"unknown kind", etcdfence.Write{Token: ok, Key: "k"}, etcdfence.ErrInvalidWrite},
		{"negative version", etcdfence.Write{Kind: etcdfence.KindCompareAndSwap, Token: ok, Key: "k", Version: -1}, etcdfence.ErrInvalidWrite},
		{"delete with value", etcdfence.Write{Kind: etcdfence.KindDelete, Token: ok, Key: "k", Value: []byte("x")}, etcdfence.ErrInvalidWrite},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Commit(ctx, []etcdfence.Write{c.w})
			require.NoError(t, err)
			r := etcdfence.BatcherDo(ctx, b, c.w)
			if c.want == nil {
				require.NoError(t, res[0].Err)
				require.NoError(t, r.Err)
				return
			}
			require.ErrorIs(t, res[0].Err, c.want)
			require.ErrorIs(t, r.Err, c.want)
		})
	}

	// The single-write methods give the same typed errors.
	_, err = s.Put(ctx, fence.Token{}, "k", nil)
	require.ErrorIs(t, err, fence.ErrInvalidToken)
	_, err = s.Put(ctx, ok, longKey, nil)
	require.ErrorIs(t, err, etcdfence.ErrInvalidKey)
	_, err = s.Get(ctx, ok, "")
	require.ErrorIs(t, err, etcdfence.ErrInvalidKey)
	_, err = s.Delete(ctx, fence.Token{Scope: "p/1", Epoch: 0}, "k")
	require.ErrorIs(t, err, fence.ErrInvalidToken)
	_, err = s.CompareAndSwap(ctx, ok, "k", 0, bigValue)
	require.ErrorIs(t, err, etcdfence.ErrInvalidWrite)
	require.ErrorIs(t, s.Advance(ctx, fence.Token{Scope: "", Epoch: 3}), fence.ErrInvalidToken)
	_, err = s.Floor(ctx, "")
	require.ErrorIs(t, err, fence.ErrInvalidToken)

	// A data key that would land on a floor is refused.
	cfg := etcdfence.DefaultConfig()
	cfg.Prefix = "/test/bad/"
	cfg.ClusterPrefix = "/test/bad/"
	s2, err := etcdfence.New(cli, cfg)
	require.NoError(t, err)
	_, err = s2.Put(ctx, ok, "fence/p/1", []byte("9999999999999999999"))
	require.ErrorIs(t, err, etcdfence.ErrInvalidKey)
}

func TestConfigValidate(t *testing.T) {
	named := etcdfence.DefaultConfig()
	named.Cluster = "prod"
	require.NoError(t, named.Validate())
	require.NoError(t, etcdfence.Config{Cluster: "prod"}.Validate(), "zero fields take defaults")
	require.NoError(t, etcdfence.Config{ClusterPrefix: "/x/"}.Validate())
	for name, c := range map[string]etcdfence.Config{
		"no fleet (defaults)":  etcdfence.DefaultConfig(),
		"no fleet (zero)":      {},
		"no fleet (data only)": {Prefix: "/data/"},
	} {
		err := c.Validate()
		require.ErrorIs(t, err, etcdfence.ErrNoFleet, name)
		require.ErrorIs(t, err, etcdfence.ErrInvalidConfig, name)
	}
	for name, c := range map[string]etcdfence.Config{
		"negative key len":     {Cluster: "c", MaxKeyLen: -1},
		"negative value len":   {Cluster: "c", MaxValueLen: -1},
		"too few ops":          {Cluster: "c", MaxTxnOps: 2},
		"prefix fills key len": {Cluster: "c", Prefix: "/0123456789/", MaxKeyLen: 12},
		"txn bytes too small":  {Cluster: "c", MaxTxnBytes: 1000},
		"prefix inside fences": {Cluster: "c", Prefix: "/tenure/c/fence/x/"},
		"prefix equals fences": {ClusterPrefix: "/f", Prefix: "/f/fence/"},
		"cluster with slash":   {Cluster: "a/b"},
		"cluster with NUL":     {Cluster: "a\x00"},
		"prefix with NUL":      {ClusterPrefix: "/a\x00/"},
	} {
		err := c.Validate()
		require.ErrorIs(t, err, etcdfence.ErrInvalidConfig, name)
		require.NotErrorIs(t, err, etcdfence.ErrNoFleet, name)
	}
	_, err := etcdfence.New(nil, etcdfence.Config{})
	require.ErrorIs(t, err, etcdfence.ErrInvalidConfig)
	_, err = etcdfence.NewBatcher(nil, etcdfence.BatcherConfig{})
	require.ErrorIs(t, err, etcdfence.ErrInvalidConfig)

	require.NoError(t, etcdfence.DefaultBatcherConfig().Validate())
	for name, c := range map[string]etcdfence.BatcherConfig{
		"negative batch":        {MaxBatch: -1},
		"negative linger":       {Linger: -1},
		"linger beyond timeout": {Linger: 20e9},
	} {
		require.ErrorIs(t, c.Validate(), etcdfence.ErrInvalidConfig, name)
	}
	s, err := etcdfence.New(&clientv3.Client{KV: clientv3.NewKVFromKVClient(nil, nil)}, etcdfence.Config{Cluster: "prod"})
	require.NoError(t, err)
	require.Equal(t, "/tenure/prod/fence/", s.FencePrefix())
	require.Equal(t, "/tenure/prod/fence/p/1", etcdfence.FloorKey(s, "p/1"))
	s, err = etcdfence.New(&clientv3.Client{KV: clientv3.NewKVFromKVClient(nil, nil)}, etcdfence.Config{Cluster: "prod", ClusterPrefix: "/x"})
	require.NoError(t, err)
	require.Equal(t, "/x/fence/", s.FencePrefix())
}

// TestNilArguments: every constructor and every method of a zero value
// refuses a nil or typed-nil collaborator with ErrNilArgument (which wraps
// ErrInvalidConfig), without panicking.
func TestNilArguments(t *testing.T) {
	ctx := context.Background()
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	var zero etcdfence.Store
	var zeroBatcher etcdfence.Batcher
	for name, call := range map[string]func() error{
		"New(nil)":                  func() error { _, err := etcdfence.New(nil, etcdfence.Config{}); return err },
		"New(nil *clientv3.Client)": func() error { _, err := etcdfence.New((*clientv3.Client)(nil), etcdfence.Config{}); return err },
		"New(KV(nil *Client))": func() error {
			var kv clientv3.KV = (*clientv3.Client)(nil)
			_, err := etcdfence.New(kv, etcdfence.Config{})
			return err
		},
		"New(&clientv3.Client{})": func() error { _, err := etcdfence.New(&clientv3.Client{}, etcdfence.Config{}); return err },
		"NewBatcher(nil)":         func() error { _, err := etcdfence.NewBatcher(nil, etcdfence.BatcherConfig{}); return err },
		"NewBatcher(zero Store)":  func() error { _, err := etcdfence.NewBatcher(&zero, etcdfence.BatcherConfig{}); return err },
		"zero Store Put":          func() error { _, err := zero.Put(ctx, tok, "k", nil); return err },
		"zero Store Delete":       func() error { _, err := zero.Delete(ctx, tok, "k"); return err },
		"zero Store CAS":          func() error { _, err := zero.CompareAndSwap(ctx, tok, "k", 0, nil); return err },
		"zero Store Get":          func() error { _, err := zero.Get(ctx, tok, "k"); return err },
		"zero Store Advance":      func() error { return zero.Advance(ctx, tok) },
		"zero Store Floor":        func() error { _, err := zero.Floor(ctx, "p/1"); return err },
		"zero Store Commit": func() error {
			rs, _ := zero.Commit(ctx, []etcdfence.Write{{Kind: etcdfence.KindPut, Token: tok, Key: "k"}})
			return rs[0].Err
		},
		"zero Batcher Put": func() error { _, err := zeroBatcher.Put(ctx, tok, "k", nil); return err },
		"zero Batcher Do": func() error {
			return etcdfence.BatcherDo(ctx, &zeroBatcher, etcdfence.Write{Kind: etcdfence.KindPut, Token: tok, Key: "k"}).Err
		},
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		require.ErrorIs(t, err, etcdfence.ErrNilArgument, name)
		require.ErrorIs(t, err, etcdfence.ErrInvalidConfig, name)
		require.Equal(t, 1, strings.Count(err.Error(), "etcdfence:"), "%s: one prefix: %v", name, err)
	}
	require.NotPanics(t, zeroBatcher.Close, "zero Batcher Close")
}
