package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMonotonic: 32 goroutines write with interleaved epochs (some advance
// their scope, some present older epochs), half through one Store and half
// through another over its own client, as two processes would; in the
// store's own commit order, read back from a watch, the accepted writes'
// epochs never decrease per scope, every accepted write is there and no
// refused one is.
func TestMonotonic(t *testing.T) {
	c := cluster.New(t, 1)
	clis := []*clientv3.Client{c.NewClient(t), c.NewClient(t)}
	for _, path := range []string{"store", "batcher"} {
		t.Run(path, func(t *testing.T) {
			var ws []writer
			for _, cli := range clis {
				s := newStore(t, cli, "mono-"+path)
				var w writer = s
				if path == "batcher" {
					b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
					require.NoError(t, err)
					defer func() {
						require.NoError(t, b.Close())
						st := b.Stats()
						t.Logf("batcher: %d writes in %d commits", st.Writes, st.Commits)
					}()
					w = b
				}
				ws = append(ws, w)
			}
			monotonic(t, clis[0], newStore(t, clis[0], "mono-"+path), ws)
		})
	}
}

func monotonic(t *testing.T, cli *clientv3.Client, s *etcdfence.Store, ws []writer) {
	const (
		goroutines = 32
		perWriter  = 25
		scopes     = 4
	)
	ctx := testCtx(t)
	prefix := s.Config().Prefix
	start, err := cli.Get(ctx, "/")
	require.NoError(t, err)
	startRev := start.Header.Revision

	var latest [scopes]atomic.Int64 // newest epoch handed out per scope
	for i := range latest {
		latest[i].Store(1)
	}
	type write struct {
		scope string
		epoch int64
		id    string
	}
	var (
		mu       sync.Mutex
		accepted = map[string]write{}
		refused  int
	)
	var wg sync.WaitGroup
	for g := range goroutines {
		w := ws[g%len(ws)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range perWriter {
				sc := rng.IntN(scopes)
				var e int64
				switch r := rng.IntN(10); {
				case r < 2: // a new owner takes over
					e = latest[sc].Add(1)
				case r < 6: // the current owner continues
					e = latest[sc].Load()
				default: // an older owner, possibly superseded
					e = max(1, latest[sc].Load()-int64(rng.IntN(3)))
				}
				tok := fence.Token{Scope: fence.PartitionScope(sc), Epoch: e}
				id := fmt.Sprintf("g%d-%d", g, i)
				key := fmt.Sprintf("s%d/k%d", sc, rng.IntN(6))
				_, err := w.Put(ctx, tok, key, []byte(fmt.Sprintf("%s %d %s", tok.Scope, e, id)))
				mu.Lock()
				switch {
				case err == nil:
					accepted[id] = write{tok.Scope, e, id}
				case errors.Is(err, fence.ErrStale):
					var se *fence.StaleError
					if !errors.As(err, &se) || se.Presented >= se.Current {
						t.Errorf("write %s: refusal without a newer current epoch: %v", id, err)
					}
					refused++
				default:
					t.Errorf("write %s: %v", id, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, accepted)
	require.Positive(t, refused, "the interleaving produced no stale writes")
	t.Logf("%d accepted, %d refused", len(accepted), refused)

	// Read the commit order back from a watch over the data prefix.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(startRev+1))
	last := map[string]int64{}
	seen := map[string]bool{}
	for len(seen) < len(accepted) {
		wr, ok := <-wch
		require.True(t, ok, "watch ended after %d of %d writes", len(seen), len(accepted))
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			f := strings.Fields(string(ev.Kv.Value))
			require.Len(t, f, 3)
			e, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			want, ok := accepted[f[2]]
			require.True(t, ok, "refused write %s is in the store", f[2])
			require.Equal(t, want, write{f[0], e, f[2]})
			require.False(t, seen[f[2]], "write %s committed twice", f[2])
			seen[f[2]] = true
			require.GreaterOrEqual(t, e, last[f[0]], "scope %s: epoch %d committed after %d (revision %d)", f[0], e, last[f[0]], ev.Kv.ModRevision)
			last[f[0]] = e
		}
	}
	for sc := range scopes {
		floor, err := s.Floor(ctx, fence.PartitionScope(sc))
		require.NoError(t, err)
		require.GreaterOrEqual(t, floor, last[fence.PartitionScope(sc)])
	}
}
