package etcdfence

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// observedKV is a clientv3.KV over a real etcd that records the
// comparisons of every transaction it sends.
type observedKV struct {
	clientv3.KV
	mu   sync.Mutex
	txns [][]*pb.Compare
}

func (o *observedKV) Txn(ctx context.Context) clientv3.Txn {
	return &observedTxn{Txn: o.KV.Txn(ctx), kv: o}
}

// since returns the comparisons of the transactions sent after the first
// n.
func (o *observedKV) since(n int) [][]*pb.Compare {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.txns[n:])
}

func (o *observedKV) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.txns)
}

type observedTxn struct {
	clientv3.Txn
	kv *observedKV
}

func (t *observedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	var cmps []*pb.Compare
	for i := range cs {
		cmps = append(cmps, cs[i].GetCompare())
	}
	t.kv.mu.Lock()
	t.kv.txns = append(t.kv.txns, cmps)
	t.kv.mu.Unlock()
	t.Txn = t.Txn.If(cs...)
	return t
}

// isGenerationForm reports whether cmps are the generation form's: one
// comparison, on the generation key's ModRevision.
func isGenerationForm(s *Store, cmps []*pb.Compare) bool {
	return len(cmps) == 1 && string(cmps[0].Key) == s.GenerationKey() && cmps[0].Target == pb.Compare_MOD
}

// requireGenerationRule checks invariant G on etcd's state: the generation
// key was written at or after the last write of every floor.
func requireGenerationRule(t *testing.T, cli *clientv3.Client, s *Store) {
	t.Helper()
	resp, err := cli.Get(context.Background(), s.cfg.FencePrefix, clientv3.WithPrefix())
	require.NoError(t, err)
	var gen, newest int64
	for _, kv := range resp.Kvs {
		if string(kv.Key) == s.GenerationKey() {
			gen = kv.ModRevision
		} else {
			newest = max(newest, kv.ModRevision)
		}
	}
	require.GreaterOrEqual(t, gen, newest, "a floor was written after the generation")
}

// TestGenerationForm: a Store that knows the floors of a batch's scopes at
// the current generation commits the batch with one comparison. A floor
// raised by another Store (another process) makes that comparison fail; the
// writes go again in the steady form, which refuses exactly the ones the new
// floor makes stale, and later batches take the generation form again.
// Every floor write of every path writes the generation too.
func TestGenerationForm(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	cfg := Config{Prefix: "/gen/data/", FencePrefix: "/gen/fence/"}
	okv := &observedKV{KV: c.NewClient(t)}
	a, err := New(okv, cfg)
	require.NoError(t, err)
	b, err := New(c.NewClient(t), cfg)
	require.NoError(t, err)
	ctx := context.Background()
	tok := func(scope int, e int64) fence.Token { return fence.Token{Scope: fence.PartitionScope(scope), Epoch: e} }
	commit := func(e1, e2 int64, value string) []Result {
		t.Helper()
		res, err := a.Commit(ctx, []Write{
			PutWrite(tok(1, e1), "k1", []byte(value)),
			PutWrite(tok(2, e2), "k2", []byte(value)),
			PutWrite(tok(3, 5), "k3", []byte(value)),
		})
		require.NoError(t, err)
		requireGenerationRule(t, cli, a)
		return res
	}

	// Scopes never written: the first commit learns their floors.
	for _, r := range commit(5, 5, "v1") {
		require.NoError(t, r.Err)
	}
	// Now one comparison does.
	n := okv.count()
	for _, r := range commit(5, 5, "v2") {
		require.NoError(t, r.Err)
	}
	txns := okv.since(n)
	require.Len(t, txns, 1)
	require.True(t, isGenerationForm(a, txns[0]), "comparisons %v", txns[0])

	// Raising a floor in the generation form writes the generation.
	n = okv.count()
	for _, r := range commit(5, 6, "v3") {
		require.NoError(t, r.Err)
	}
	require.True(t, isGenerationForm(a, okv.since(n)[0]))

	// Another process's new owner of p/1 raises its floor to 7: the
	// generation form fails, and the steady form refuses the write at 5
	// alone.
	require.NoError(t, b.Advance(ctx, tok(1, 7)))
	requireGenerationRule(t, cli, b)
	n = okv.count()
	res := commit(5, 6, "zombie")
	require.True(t, isGenerationForm(a, okv.since(n)[0]))
	var stale *fence.StaleError
	require.ErrorAs(t, res[0].Err, &stale)
	require.Equal(t, int64(7), stale.Current)
	require.NoError(t, res[1].Err)
	require.NoError(t, res[2].Err)
	got, err := cli.Get(ctx, "/gen/data/k1")
	require.NoError(t, err)
	require.Equal(t, "v3", string(got.Kvs[0].Value), "the stale write landed")

	// After a few batches in the steady form, the generation form is back.
	back := false
	for i := range 8 {
		n = okv.count()
		for _, r := range commit(7, 6, fmt.Sprint("v", 4+i)) {
			require.NoError(t, r.Err)
		}
		if isGenerationForm(a, okv.since(n)[0]) {
			back = true
			break
		}
	}
	require.True(t, back, "the generation form never came back")

	// Single writes (a scope this Store has not seen) and Advance write
	// the generation too, and the Store does not trust what it knew.
	_, err = a.Put(ctx, tok(9, 3), "k9", nil)
	require.NoError(t, err)
	requireGenerationRule(t, cli, a)
	require.NoError(t, a.Advance(ctx, tok(2, 8)))
	requireGenerationRule(t, cli, a)
	n = okv.count()
	res = commit(7, 6, "old")
	require.False(t, isGenerationForm(a, okv.since(n)[0]), "the generation form after this Store's own Advance")
	require.ErrorAs(t, res[1].Err, &stale)
	require.Equal(t, int64(8), stale.Current)

	// The generation key is no scope's floor.
	require.True(t, strings.HasSuffix(a.GenerationKey(), "/fence/"))
}
