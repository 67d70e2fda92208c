package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

func TestBatcherLinger(t *testing.T) {
	ctx, cli, s := setup(t, "linger")
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{MaxBatch: 4, Linger: 20 * time.Millisecond})
	require.NoError(t, err)
	defer b.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			tok := fence.Token{Scope: fence.PartitionScope(w % 2), Epoch: 1}
			for i := range 10 {
				_, err := b.Put(ctx, tok, fmt.Sprintf("w%d/%d", w, i), []byte("v"))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, dump(t, cli, etcdfence.DataPrefix(s)), 80)
	st := b.Stats()
	require.Equal(t, uint64(80), st.Writes)
	require.GreaterOrEqual(t, st.Commits, uint64(20), "MaxBatch 4 bounds every commit")
}

func TestBatcherClose(t *testing.T) {
	ctx, _, s := setup(t, "close")
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	require.NoError(t, err)
	tok := fence.Token{Scope: "p/1", Epoch: 1}

	// Writers keep writing until the batcher closes under them.
	var wg sync.WaitGroup
	started := make(chan struct{}, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := b.Put(ctx, tok, fmt.Sprintf("w%d/%d", w, i), []byte("v"))
				if i == 0 {
					started <- struct{}{}
				}
				switch {
				case err == nil:
				case errors.Is(err, etcdfence.ErrClosed):
					return
				case errors.Is(err, context.Canceled):
					// The commit in flight when Close came was aborted.
				default:
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	for range 16 {
		<-started
	}
	b.Close()
	wg.Wait()
	b.Close() // Close is idempotent

	_, err = b.Put(ctx, tok, "late", nil)
	require.ErrorIs(t, err, etcdfence.ErrClosed)
	_, err = b.Delete(ctx, tok, "late")
	require.ErrorIs(t, err, etcdfence.ErrClosed)
	_, err = b.CompareAndSwap(ctx, tok, "late", 0, nil)
	require.ErrorIs(t, err, etcdfence.ErrClosed)
}

func TestBatcherContext(t *testing.T) {
	cli := startCluster(t)
	s := newStore(t, cli, "ctx")
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.Put(ctx, fence.Token{Scope: "p/1", Epoch: 1}, "k", nil)
	require.ErrorIs(t, err, context.Canceled)
	it, err := s.Get(fencetest.Context(t), fence.Token{Scope: "p/1", Epoch: 1}, "k")
	require.NoError(t, err)
	require.False(t, it.Exists(), "a write whose context ended before submission is not applied")
}

// TestBatcherAlone: a writer alone with the Batcher never waits for a
// batch: each of its writes commits at once, on its own goroutine.
func TestBatcherAlone(t *testing.T) {
	ctx, _, s := setup(t, "alone")
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	var last int64
	for i := range 5 {
		rev, err := b.Put(ctx, tok, "k", []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		require.Greater(t, rev, last)
		last = rev
	}
	require.Equal(t, etcdfence.BatcherStats{Commits: 5, Writes: 5, Alone: 5}, b.Stats())
}

// TestBatcherHotKey: 16 writers put one key under one token. Every Put is
// answered; each writer's revisions rise; a watch sees each writer's values
// in the order it wrote them; Puts coalesced into one write share its
// revision, so the key's version is the number of distinct revisions
// answered; and the key holds a value written at the last of them.
func TestBatcherHotKey(t *testing.T) {
	ctx, cli, s := setup(t, "hotkey")
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	require.NoError(t, s.Advance(ctx, tok))
	b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	start, err := cli.Get(ctx, "/")
	require.NoError(t, err)

	const writers, puts = 16, 40
	revs := make([][]int64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range puts {
				rev, err := b.Put(ctx, tok, "hot", []byte(fmt.Sprintf("%d %d", w, i)))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				if i > 0 && rev <= revs[w][i-1] {
					t.Errorf("writer %d: revision %d after %d", w, rev, revs[w][i-1])
				}
				revs[w] = append(revs[w], rev)
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	t.Logf("batcher: %+v", st)
	require.Equal(t, uint64(writers*puts), st.Writes)
	require.Positive(t, st.Coalesced, "16 writers on one key never coalesced")

	distinct := map[int64]bool{}
	var last int64
	for _, rs := range revs {
		for _, r := range rs {
			distinct[r] = true
			last = max(last, r)
		}
	}
	it, err := s.Get(ctx, tok, "hot")
	require.NoError(t, err)
	require.Equal(t, int64(len(distinct)), it.Version, "one version per write that reached etcd")
	require.Equal(t, last, it.ModRevision)

	// The watch sees one event per distinct revision, and each writer's
	// values in its order.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, etcdfence.DataPrefix(s)+"hot", clientv3.WithRev(start.Header.Revision+1))
	next := make([]int, writers) // the least index writer w may show next
	for seen := 0; seen < len(distinct); {
		wr, ok := <-wch
		require.True(t, ok)
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			require.True(t, distinct[ev.Kv.ModRevision], "revision %d answered to no one", ev.Kv.ModRevision)
			var w, i int
			_, err := fmt.Sscanf(string(ev.Kv.Value), "%d %d", &w, &i)
			require.NoError(t, err)
			require.GreaterOrEqual(t, i, next[w], "writer %d's put %d applied after a later one", w, i)
			require.Equal(t, revs[w][i], ev.Kv.ModRevision, "writer %d's put %d answered with its revision", w, i)
			next[w] = i + 1
			seen++
		}
	}
}
