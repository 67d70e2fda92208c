package etcdfence_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMonotonic: 32 goroutines write with interleaved epochs (some advance
// their scope, some present older epochs), half through one Store and half
// through another over its own client, as two processes would; in the
// store's own commit order, read back from a watch, the accepted writes'
// epochs never decrease per scope, every accepted write is there and no
// refused one is. Through a coalescing Batcher, an accepted write may
// instead have been coalesced: then a write of the same key under the same
// token is there, at the revision the coalesced write was answered with.
func TestMonotonic(t *testing.T) {
	c := cluster.New(t, 1)
	clis := []*clientv3.Client{c.NewClient(t), c.NewClient(t)}
	for _, path := range []string{"store", "batcher", "batcher-nocoalesce"} {
		t.Run(path, func(t *testing.T) {
			var ws []writer
			var coalesced uint64
			for _, cli := range clis {
				s := newStore(t, cli, "mono-"+path)
				var w writer = s
				if path != "store" {
					b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{NoCoalesce: path == "batcher-nocoalesce"})
					require.NoError(t, err)
					defer func() {
						b.Close()
						st := b.Stats()
						t.Logf("batcher: %+v", st)
						coalesced += st.Coalesced
					}()
					w = b
				}
				ws = append(ws, w)
			}
			defer func() {
				if path == "batcher-nocoalesce" {
					require.Zero(t, coalesced)
				}
			}()
			monotonic(t, clis[0], newStore(t, clis[0], "mono-"+path), ws)
		})
	}
}

func monotonic(t *testing.T, cli *clientv3.Client, s *etcdfence.Store, ws []writer) {
	const scopes = 4
	ctx := fencetest.Context(t)
	prefix := etcdfence.DataPrefix(s)
	start, err := cli.Get(ctx, "/")
	require.NoError(t, err)
	startRev := start.Header.Revision

	cfg := fencetest.Config{Goroutines: 32, PerWriter: 25, Scopes: scopes, Seed: 7}
	var mu sync.Mutex
	keyOf := map[string]string{} // write ID -> key
	accepted, refused := fencetest.Interleave(t, cfg, func(g, i int, tok fence.Token, id string) (int64, error) {
		key := fmt.Sprintf("%s/k%d", tok.Scope, i%6)
		mu.Lock()
		keyOf[id] = key
		mu.Unlock()
		return ws[g%len(ws)].Put(ctx, tok, key, []byte(fmt.Sprintf("%s %d %s", tok.Scope, tok.Epoch, id)))
	})
	t.Logf("%d accepted, %d refused", len(accepted), refused)
	byID := map[string]fencetest.Write{}
	var lastRev int64
	for _, w := range accepted {
		byID[w.ID] = w
		lastRev = max(lastRev, w.Seq) // Put's revision
	}

	// Read the commit order back from a watch over the data prefix: every
	// accepted write is there once (or coalesced), no refused one is, and
	// per scope the epochs never decrease.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(startRev+1))
	var committed []fencetest.Write
	seen := map[string]bool{}
	type visible struct {
		key string
		rev int64
		tok fence.Token
	}
	written := map[visible]bool{}
	for rev := startRev; rev < lastRev; {
		wr, ok := <-wch
		require.True(t, ok, "watch ended at revision %d of %d", rev, lastRev)
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			rev = ev.Kv.ModRevision
			f := strings.Fields(string(ev.Kv.Value))
			require.Len(t, f, 3)
			e, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			want, ok := byID[f[2]]
			require.True(t, ok, "refused write %s is in the store", f[2])
			require.Equal(t, want.Token, fence.Token{Scope: f[0], Epoch: e})
			require.Equal(t, want.Seq, rev, "write %s answered with its revision", f[2])
			require.False(t, seen[f[2]], "write %s committed twice", f[2])
			seen[f[2]] = true
			written[visible{key: strings.TrimPrefix(string(ev.Kv.Key), prefix), rev: rev, tok: want.Token}] = true
			want.Seq = int64(len(committed)) // the watch's order, which is etcd's
			committed = append(committed, want)
		}
	}
	for _, w := range accepted {
		if !seen[w.ID] {
			require.True(t, written[visible{key: keyOf[w.ID], rev: w.Seq, tok: w.Token}],
				"accepted write %s is not in the store, nor coalesced into a write there", w.ID)
		}
	}
	byScope := fencetest.CheckOrder(t, committed)
	for sc := range scopes {
		scope := fence.PartitionScope(sc)
		floor, err := s.Floor(ctx, scope)
		require.NoError(t, err)
		if ws := byScope[scope]; len(ws) > 0 {
			require.GreaterOrEqual(t, floor, ws[len(ws)-1].Token.Epoch)
		}
	}
}
