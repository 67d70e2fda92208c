package grpcroute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// A rolling restart of every node of the fleet (each one closed
// gracefully, then started again on a new port) under continuous load of
// unary and client-streaming calls fails no call at the caller, and the
// store holds every acknowledged increment exactly once.
func TestRollingRestart(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "rolling", false)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		f.start(id)
	}
	f.waitStable()
	c, counter := newClient(t, f.cli, "rolling", grpcroute.ClientConfig{})

	const keys = 24
	var (
		acked  [keys]atomic.Int64
		calls  atomic.Int64
		failed atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		errMu  sync.Mutex
		errs   []error
		done   = make(chan struct{}, 1024) // one per completed call, dropped when full
	)
	fail := func(err error) {
		failed.Add(1)
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	unary := func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := rand.IntN(keys)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_, err := counter.Add(ctx, &counterpb.AddRequest{Key: fmt.Sprintf("k%d", k), Delta: 1})
			cancel()
			calls.Add(1)
			select {
			case done <- struct{}{}:
			default:
			}
			if err != nil {
				fail(err)
				continue
			}
			acked[k].Add(1)
		}
	}
	streaming := func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := rand.IntN(keys)
			key := fmt.Sprintf("k%d", k)
			ctx, cancel := context.WithTimeout(grpcroute.WithKey(context.Background(), key), 15*time.Second)
			err := func() error {
				s, err := counter.AddStream(ctx)
				if err != nil {
					return err
				}
				for range 3 {
					if err := s.Send(&counterpb.AddRequest{Key: key, Delta: 1}); err != nil {
						return err
					}
				}
				_, err = s.CloseAndRecv()
				return err
			}()
			cancel()
			calls.Add(1)
			select {
			case done <- struct{}{}:
			default:
			}
			if err != nil {
				fail(err)
				continue
			}
			acked[k].Add(3)
		}
	}
	for range 4 {
		wg.Go(unary)
	}
	wg.Go(streaming)

	// Let load flow before each restart and after the last.
	flowing := func() {
		t.Helper()
		for range len(done) {
			<-done
		}
		for i := range 100 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d calls completed", i)
			}
		}
	}
	for _, id := range ids {
		flowing()
		f.stopMember(id)
		f.start(id)
		f.waitStable()
	}
	flowing()
	close(stop)
	wg.Wait()

	errMu.Lock()
	defer errMu.Unlock()
	require.Zero(t, failed.Load(), "calls failed at the caller: %v", errs)
	for k := range keys {
		assert.Equal(t, acked[k].Load(), f.store.value(fmt.Sprintf("k%d", k)), "key k%d", k)
	}
	st := c.Stats()
	t.Logf("%d calls, %d attempts, %d retries; client %+v", calls.Load(), st.Attempts, st.Retries, st)
	assert.Positive(t, st.Retried, "some calls were refused during the moves and retried")
}
