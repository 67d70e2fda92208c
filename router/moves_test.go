package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestDoRoutesEndedTenureAgain: work that reports the end of its tenure
// runs again while the partition is served here, bounded by Backoff; other
// errors come back unchanged, and nothing is retried once ctx ended.
func TestDoRoutesEndedTenureAgain(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "again", fleetOptions{Partitions: 4})
	m := f.start("solo")
	f.waitStable()
	r, err := router.New(m.node, router.Config{Backoff: router.Backoff{MaxAttempts: 3, Initial: time.Millisecond, Max: time.Millisecond}})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()

	for _, ended := range []error{
		&fence.StaleError{Scope: "p/1", Presented: 3, Current: 4},
		fmt.Errorf("store: %w", ownership.ErrMoved),
		fmt.Errorf("store: %w", ownership.ErrLost),
	} {
		runs := 0
		err := r.Do(ctx, "k", func(context.Context, fence.Token) error {
			if runs++; runs == 1 {
				return ended
			}
			return nil
		})
		require.NoError(t, err, "%v", ended)
		assert.Equal(t, 2, runs, "%v: run again here", ended)

		runs = 0
		err = r.Do(ctx, "k", func(context.Context, fence.Token) error { runs++; return ended })
		require.ErrorIs(t, err, router.ErrRetriesExhausted)
		require.ErrorIs(t, err, ended)
		assert.Equal(t, 3, runs)
	}

	runs := 0
	boom := errors.New("boom")
	assert.Same(t, boom, r.Do(ctx, "k", func(context.Context, fence.Token) error { runs++; return boom }))
	assert.Equal(t, 1, runs)

	cctx, cancel := context.WithCancel(ctx)
	runs = 0
	err = r.Do(cctx, "k", func(context.Context, fence.Token) error { runs++; cancel(); return fence.ErrStale })
	assert.ErrorIs(t, err, fence.ErrStale, "the caller has gone: no retry")
	assert.Equal(t, 1, runs)
}

// TestDoFollowsPlannedMove: work in flight when its node leaves reports
// that its tenure ended; Do answers with the wrong-owner error naming the
// next owner (or ErrClosed once the node has closed), and the work then
// runs there.
func TestDoFollowsPlannedMove(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "follow", fleetOptions{Partitions: 8})
	a := f.start("a")
	b := f.start("b")
	f.waitStable()
	key := keyOwnedBy(t, a, "follow")

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.router.Do(context.Background(), key, func(ctx context.Context, _ fence.Token) error {
			close(started)
			// The store refuses writes once the partition is handed off, or
			// the tenure's end cancels the work.
			for {
				ch := a.node.Changed()
				h, err := a.node.Hold(key)
				if err != nil {
					return fmt.Errorf("store: %w", ownership.ErrMoved)
				}
				h.Release()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-ch:
				}
			}
		})
	}()
	<-started
	stopped := make(chan struct{})
	go func() { defer close(stopped); f.stopMember("a") }()
	err := <-done
	<-stopped
	// The answer names the next owner, or, when the node had closed
	// before it could say (its last view still names itself), says that it
	// is closed: the caller asks the fleet, which names b.
	var we *ownership.WrongOwnerError
	if errors.As(err, &we) {
		assert.Equal(t, "b", we.Owner)
		assert.Equal(t, b.addr, we.Addr)
		assert.ErrorIs(t, err, ownership.ErrNotOwner)
	} else {
		require.ErrorIs(t, err, router.ErrClosed)
		f.waitStable()
		assert.Equal(t, "b", b.node.Lookup(key).Owner)
	}
	t.Logf("Do on the leaving node: %v", err)

	require.NoError(t, b.router.Do(context.Background(), key, func(context.Context, fence.Token) error { return nil }))
}

// TestClientRetriesRefusedLocalWrite: a local handler whose write the store
// refused as stale answers with WriteError; the refusal carries the
// partition's hint and the Client sends the request again, with the same
// idempotency key, until it is served.
func TestClientRetriesRefusedLocalWrite(t *testing.T) {
	etcd := cluster.New(t, 1)
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		idems []string
		fail  atomic.Bool
	)
	fail.Store(true)
	f := newFleet(t, etcd, "refused", fleetOptions{Handler: func(m *member) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			idem := r.Header.Get(router.HeaderIdempotencyKey)
			mu.Lock()
			seen[idem]++
			n := seen[idem]
			idems = append(idems, idem)
			mu.Unlock()
			tok, _ := fence.FromContext(r.Context())
			if fail.Load() && n == 1 {
				router.WriteError(w, r, fmt.Errorf("store: %w", &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: tok.Epoch + 1}))
				return
			}
			io.WriteString(w, "ok")
		})
	}})
	a := f.start("a")
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "refused"})
	waitClientAgrees(t, c, f)

	resp, err := postVia(context.Background(), c, "k1", "/k/k1", "text/plain", []byte("x"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))
	mu.Lock()
	require.Len(t, idems, 2)
	assert.Equal(t, idems[0], idems[1], "the same idempotency key")
	mu.Unlock()

	// The refusal on the wire: 409 stale, retryable, with the hint.
	hc := newHTTPClient(t)
	req, _ := http.NewRequest("POST", "http://"+a.addr+"/k/k2", nil)
	req.Header.Set(router.HeaderIdempotencyKey, "direct")
	resp, err = hc.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	ref := readRefusal(t, resp)
	assert.Equal(t, httpfence.RefusalStale, ref.Kind)
	assert.True(t, ref.Retryable())
	assert.ErrorIs(t, ref, fence.ErrStale)
	route := a.node.Lookup("k2")
	assert.Equal(t, route.Partition, router.HintOf(ref).Partition)
	assert.Equal(t, fence.PartitionScope(route.Partition), ref.Scope)
	assert.Equal(t, route.Epoch, ref.Presented)
	assert.Empty(t, router.HintOf(ref).Owner, "the answer never names the answering node")
}
