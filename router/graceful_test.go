package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestRollingRestartGraceful restarts every node of a fleet, one by one
// (graceful leave, then rejoin under the same ID), under continuous keyed
// load, and shows that planned moves are invisible to callers: not one
// request fails at the caller, and every acknowledged increment is counted
// exactly once. The load goes through a Client from outside the fleet, and
// through Router.Do in process, where the caller picks the node from its
// own Lookup and follows wrong-owner answers to the node they name (that is
// routing: the error is the route, not a failure). Request latencies during
// the moves and in steady state are logged, never asserted.
func TestRollingRestartGraceful(t *testing.T) {
	t.Run("Client", func(t *testing.T) { rollingGraceful(t, viaClient) })
	t.Run("Do", func(t *testing.T) { rollingGraceful(t, viaDo) })
}

type rollingVia int

const (
	viaClient rollingVia = iota
	viaDo
)

func rollingGraceful(t *testing.T, via rollingVia) {
	const (
		nodes      = 4
		partitions = 64
		minTotal   = 3000
		workers    = 16
		nkeys      = 128
	)
	name := "graceful-" + strconv.Itoa(int(via))
	etcd := cluster.New(t, 1)
	store := newCounterStore()
	// Work takes a moment, so that moves find work in flight.
	store.workTime = 2 * time.Millisecond
	f := newFleet(t, etcd, name, fleetOptions{
		Partitions: partitions,
		Fencers:    []fence.Fencer{store},
		Handler:    store.handler,
	})
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = "node-" + strconv.Itoa(i)
		f.start(ids[i])
	}
	f.waitStable()
	var c *router.Client
	if via == viaClient {
		c = newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: name})
		waitClientAgrees(t, c, f)
	}

	var (
		next     atomic.Int64
		reroutes atomic.Int64 // in process: wrong-owner answers followed
		mu       sync.Mutex
		acked    = map[string]int64{}
		ackedIdm = map[string]bool{}
		failures []string
		samples  []latencySample
	)
	// increment sends one increment and returns nil once it is
	// acknowledged, or the error the caller sees.
	increment := func(ctx context.Context, key, idem string) error {
		if via == viaClient {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+key, http.NoBody)
			if err != nil {
				return err
			}
			req.Header.Set(router.HeaderIdempotencyKey, idem)
			resp, err := c.Do(ctx, key, req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", resp.Status, body)
			}
			return nil
		}
		return doIncrement(ctx, f, store, key, idem, &reroutes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restarted := make(chan struct{})
	firstDone := make(chan struct{})
	var firstOnce sync.Once
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= minTotal {
					select {
					case <-restarted:
						return
					case <-ctx.Done():
						return
					default:
					}
				}
				if i == minTotal/10 {
					firstOnce.Do(func() { close(firstDone) })
				}
				key := "key-" + strconv.FormatInt(i%nkeys, 10)
				idem := "inc-" + strconv.FormatInt(i, 10)
				t0 := time.Now()
				err := increment(ctx, key, idem)
				t1 := time.Now()
				mu.Lock()
				if err == nil {
					acked[key]++
					ackedIdm[idem] = true
					samples = append(samples, latencySample{start: t0, end: t1})
				} else if ctx.Err() == nil {
					failures = append(failures, idem+": "+err.Error())
				}
				mu.Unlock()
			}
		})
	}

	// Restart every node in turn, under load.
	var windows [][2]time.Time
	func() {
		defer close(restarted)
		select {
		case <-firstDone:
		case <-ctx.Done():
			t.Fatal("load did not start")
		}
		for _, id := range ids {
			t0 := time.Now()
			f.stopMember(id)
			f.waitStable()
			left := time.Since(t0)
			t1 := time.Now()
			f.start(id)
			f.waitStable()
			windows = append(windows, [2]time.Time{t0, time.Now()})
			t.Logf("restarted %s: left in %v, rejoined in %v", id, left.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
			// Steady state between restarts.
			time.Sleep(300 * time.Millisecond)
		}
		// Steady state after the last restart too.
		time.Sleep(300 * time.Millisecond)
	}()
	wg.Wait()
	elapsed := time.Since(start)

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, failures, "requests that failed at the caller")
	_ = store.gate.Do(fence.Token{Scope: "read", Epoch: 1}, func() error {
		for k := range nkeys {
			key := "key-" + strconv.Itoa(k)
			assert.Equal(t, acked[key], store.counts[key], "key %s: counted != acknowledged", key)
		}
		for idem, n := range store.applied {
			assert.Equal(t, 1, n, "increment %s applied %d times", idem, n)
			assert.True(t, ackedIdm[idem], "increment %s applied but never acknowledged", idem)
		}
		for idem := range ackedIdm {
			assert.Equal(t, 1, store.applied[idem], "increment %s acknowledged but not applied", idem)
		}
		assert.Zero(t, store.staleAccepted, "stale writes accepted")
		assert.Zero(t, store.unadvanced, "writes under an epoch no fencer saw")
		return nil
	})
	assert.LessOrEqual(t, store.maxHops.Load(), int64(1), "a request was forwarded more than once")
	assert.Zero(t, store.tokenMismatches.Load())

	steady, moving := splitLatencies(samples, windows)
	t.Logf("%d increments acknowledged in %v across %d graceful restarts, %d failed at the caller; "+
		"%d forwarded once, %d duplicates absorbed, %d stale refused and %d cut short (both routed again), %d wrong-owner answers followed",
		len(ackedIdm), elapsed.Round(time.Millisecond), nodes, len(failures), store.forwarded.Load(),
		store.duplicates.Load(), store.staleRejected.Load(), store.cutShort.Load(), reroutes.Load())
	if c != nil {
		st := c.Stats()
		t.Logf("client: %d attempts, %d retries", st.Attempts, st.Retries)
	}
	t.Logf("latency steady state: %s", steady)
	t.Logf("latency during moves: %s", moving)
}

// doIncrement is an in-process caller: it asks a node of the fleet where
// key lives, runs the increment there with Router.Do, and follows the
// wrong-owner answers to the node they name. It never retries a failure:
// an error that names no node to go to is returned.
func doIncrement(ctx context.Context, f *testFleet, store *counterStore, key, idem string, reroutes *atomic.Int64) error {
	var target *member
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if target == nil {
			ms := f.list()
			if len(ms) == 0 {
				return errors.New("no node")
			}
			from := ms[rand.IntN(len(ms))]
			route := from.node.Lookup(key)
			if target = f.get(route.Owner); target == nil {
				// The view names a node that is gone or not known yet:
				// wait for the view to change, then ask again.
				select {
				case <-from.node.Changed():
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
				}
				continue
			}
		}
		err := target.router.Do(ctx, key, func(wctx context.Context, tok fence.Token) error {
			store.work(wctx)
			if err := wctx.Err(); err != nil {
				store.cutShort.Add(1)
				return err // the tenure ended: Do routes the work again
			}
			applied, err := store.incr(tok, key, idem)
			if errors.Is(err, fence.ErrStale) {
				store.staleRejected.Add(1)
			} else if err == nil && !applied {
				store.duplicates.Add(1)
			}
			return err
		})
		if err == nil {
			return nil
		}
		var we *ownership.WrongOwnerError
		switch {
		case errors.As(err, &we) && we.Owner != "" && we.Owner != target.id:
			reroutes.Add(1)
			target = f.get(we.Owner) // nil: ask again
		case errors.Is(err, router.ErrClosed), errors.As(err, &we):
			// The node left, or names nobody else: ask the fleet again.
			reroutes.Add(1)
			target = nil
		default:
			return err
		}
	}
}

// latencySample is one acknowledged request.
type latencySample struct{ start, end time.Time }

// latencies summarizes request latencies.
type latencies []time.Duration

func (l latencies) String() string {
	if len(l) == 0 {
		return "no requests"
	}
	slices.Sort(l)
	q := func(p float64) time.Duration { return l[min(len(l)-1, int(p*float64(len(l))))] }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(l), q(0.5).Round(time.Microsecond),
		q(0.99).Round(time.Microsecond), l[len(l)-1].Round(time.Microsecond))
}

// splitLatencies returns the latencies of the requests outside and inside
// the windows of the moves.
func splitLatencies(samples []latencySample, windows [][2]time.Time) (steady, moving latencies) {
	for _, s := range samples {
		in := false
		for _, w := range windows {
			if s.start.Before(w[1]) && s.end.After(w[0]) {
				in = true
				break
			}
		}
		if in {
			moving = append(moving, s.end.Sub(s.start))
		} else {
			steady = append(steady, s.end.Sub(s.start))
		}
	}
	return steady, moving
}
