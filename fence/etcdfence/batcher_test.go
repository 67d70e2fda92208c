package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	require.Len(t, dump(t, cli, s.Config().Prefix), 80)
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
	require.NoError(t, b.Close())
	wg.Wait()
	require.NoError(t, b.Close(), "Close is idempotent")
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
