package router_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// counterStore is a fenced store shared by an in-process fleet, standing in
// for a database: per-key counters whose increments carry an idempotency
// key and are admitted through a fence.Gate. Alongside, it keeps an oracle of
// what it has seen, to check the fencing from outside the gate.
type counterStore struct {
	gate fence.Gate

	// Guarded by gate's lock: written only inside gate.Do.
	counts   map[string]int64
	applied  map[string]int            // idempotency key -> times applied
	advanced map[string]int64          // scope -> highest epoch advanced to
	epochs   map[string]map[int64]bool // scope -> epochs advanced to

	staleAccepted   int // writes admitted with an epoch below the scope's advanced epoch
	unadvanced      int // writes admitted under an epoch no fencer advanced to
	staleRejected   atomic.Int64
	duplicates      atomic.Int64
	forwarded       atomic.Int64
	maxHops         atomic.Int64
	tokenMismatches atomic.Int64
	cutShort        atomic.Int64  // work whose context had ended before it wrote
	workTime        time.Duration // each increment works this long before it writes, unless cut short

	// holdAcks names a node whose handler, after applying an increment,
	// withholds the answer until the connection drops: the increment is
	// applied but its acknowledgement is lost. held is signalled each time.
	holdAcks atomic.Pointer[string]
	held     chan struct{}

	// pauseWrite names a node whose handler pauses the next increment before
	// writing it, as a process stalled by GC or SIGSTOP would, until resume
	// is closed; the write's outcome is then sent on paused.
	pauseWrite atomic.Pointer[string]
	pausedAt   chan struct{}
	resume     chan struct{}
	paused     chan error
}

func newCounterStore() *counterStore {
	return &counterStore{
		counts:   map[string]int64{},
		applied:  map[string]int{},
		advanced: map[string]int64{},
		epochs:   map[string]map[int64]bool{},
		held:     make(chan struct{}, 1),
		pausedAt: make(chan struct{}),
		resume:   make(chan struct{}),
		paused:   make(chan error, 1),
	}
}

// work stands for the work an increment does before it writes: workTime,
// or less if ctx ends first.
func (s *counterStore) work(ctx context.Context) {
	if s.workTime <= 0 {
		return
	}
	t := time.NewTimer(s.workTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Advance implements fence.Fencer: a new owner raises the floor.
func (s *counterStore) Advance(_ context.Context, t fence.Token) error {
	return s.gate.Do(t, func() error {
		s.advanced[t.Scope] = max(s.advanced[t.Scope], t.Epoch)
		if s.epochs[t.Scope] == nil {
			s.epochs[t.Scope] = map[int64]bool{}
		}
		s.epochs[t.Scope][t.Epoch] = true
		return nil
	})
}

// incr applies one increment of key under t, at most once per idempotency
// key. It reports whether this call applied it (false: a duplicate).
func (s *counterStore) incr(t fence.Token, key, idem string) (bool, error) {
	applied := false
	err := s.gate.Do(t, func() error {
		if t.Epoch < s.advanced[t.Scope] {
			s.staleAccepted++
		}
		if !s.epochs[t.Scope][t.Epoch] {
			s.unadvanced++
		}
		if s.applied[idem] > 0 {
			return nil
		}
		s.applied[idem]++
		s.counts[key]++
		applied = true
		return nil
	})
	return applied, err
}

// handler is the local handler of every node: POST /k/{key} increments key.
func (s *counterStore) handler(m *member) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		hops := int64(len(r.Header.Values(router.HeaderForwarded)))
		if hops > 0 {
			s.forwarded.Add(1)
		}
		for {
			cur := s.maxHops.Load()
			if hops <= cur || s.maxHops.CompareAndSwap(cur, hops) {
				break
			}
		}
		tok, ok := fence.FromContext(r.Context())
		if !ok || r.Header.Get(httpfence.Header) != tok.String() ||
			tok.Scope != fence.PartitionScope(ring.PartitionOf(key, m.node.Ring().Partitions())) {
			s.tokenMismatches.Add(1)
			http.Error(w, "bad token", http.StatusInternalServerError)
			return
		}
		if id := s.pauseWrite.Load(); id != nil && *id == m.id && s.pauseWrite.CompareAndSwap(id, nil) {
			close(s.pausedAt)
			<-s.resume
			_, err := s.incr(tok, key, r.Header.Get(router.HeaderIdempotencyKey)+"-paused")
			if errors.Is(err, fence.ErrStale) {
				s.staleRejected.Add(1)
			}
			s.paused <- err
			return
		}
		s.work(r.Context())
		if err := r.Context().Err(); err != nil {
			// Cut short before writing: if the tenure ended, a retryable
			// refusal.
			s.cutShort.Add(1)
			if !router.WriteError(w, r, err) {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
			return
		}
		applied, err := s.incr(tok, key, r.Header.Get(router.HeaderIdempotencyKey))
		switch {
		case errors.Is(err, fence.ErrStale):
			// The tenure ended: a retryable refusal, which the Client
			// sends again to the new owner.
			s.staleRejected.Add(1)
			router.WriteError(w, r, err)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case applied:
			if id := s.holdAcks.Load(); id != nil && *id == m.id {
				select {
				case s.held <- struct{}{}:
				default:
				}
				<-r.Context().Done()
				return
			}
			io.WriteString(w, "applied")
		default:
			s.duplicates.Add(1)
			io.WriteString(w, "duplicate")
		}
	})
}

// TestRollingRestartWithCrashes sends 10,000 keyed increments through a
// Client while every node of the fleet is restarted, one by one, with a new
// process under the same ID: every other node leaves gracefully, the others
// crash (their
// connections drop with requests in flight and their partitions wait for
// the lease to expire). Each increment is retried with the same
// idempotency key until it gets a definite answer; the test then checks that
// every acknowledged increment is counted exactly once, that nothing was
// counted that was not acknowledged, that the store admitted no stale write,
// and that no request was forwarded more than once.
func TestRollingRestartWithCrashes(t *testing.T) {
	const (
		nodes      = 4
		partitions = 64
		total      = 10000
		workers    = 16
		nkeys      = 128
	)
	etcd := cluster.New(t, 3)
	store := newCounterStore()
	f := newFleet(t, etcd, "rolling", fleetOptions{
		Partitions: partitions,
		Fencers:    []fence.Fencer{store},
		Handler:    store.handler,
		Faulty:     true,
	})
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = "node-" + strconv.Itoa(i)
		f.start(ids[i])
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "rolling"})

	// Restart k begins when increment threshold(k) is issued, and the load
	// goes on past total until every restart is done, so that all restarts
	// happen under load.
	thresholds := make([]chan struct{}, nodes)
	for k := range thresholds {
		thresholds[k] = make(chan struct{})
	}
	threshold := func(k int) int64 { return int64(500 + k*(total-2000)/nodes) }
	restarted := make(chan struct{})

	var (
		next      atomic.Int64
		issued    int64
		reported  atomic.Int64 // failed attempts reported to the caller
		mu        sync.Mutex
		acked     = map[string]int64{}
		ackedIdem = map[string]bool{}
		lost      []string // increments that never got a definite answer
	)
	increment := func(ctx context.Context, key, idem string) bool {
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+key, http.NoBody)
			if err != nil {
				panic(err)
			}
			req.Header.Set(router.HeaderIdempotencyKey, idem)
			resp, err := c.Do(ctx, key, req)
			if err != nil {
				reported.Add(1)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
			reported.Add(1)
		}
		return false
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					select {
					case <-restarted:
						return
					case <-ctx.Done():
						return
					default:
					}
				}
				for k := range thresholds {
					if i == threshold(k) {
						close(thresholds[k])
					}
				}
				key := "key-" + strconv.FormatInt(i%nkeys, 10)
				idem := "inc-" + strconv.FormatInt(i, 10)
				ok := increment(ctx, key, idem)
				mu.Lock()
				if ok {
					acked[key]++
					ackedIdem[idem] = true
				} else {
					lost = append(lost, idem)
				}
				mu.Unlock()
			}
		})
	}

	func() {
		defer close(restarted)
		for k, id := range ids {
			select {
			case <-thresholds[k]:
			case <-ctx.Done():
				t.Fatalf("load stalled before restart %d", k)
			}
			t0 := time.Now()
			how := "gracefully"
			if k%2 == 0 {
				f.stopMember(id)
			} else {
				// The ID stays taken until the crashed process's lease
				// expires: the fleet notices, takes the partitions over,
				// and only then can the new process join.
				how = "after a crash"
				if k == 1 {
					store.pauseWrite.Store(&id)
					select {
					case <-store.pausedAt:
					case <-ctx.Done():
						t.Fatal("no request reached the node to pause")
					}
				}
				store.holdAcks.Store(&id)
				select {
				case <-store.held:
				case <-ctx.Done():
					t.Fatal("no request reached the node to crash")
				}
				f.killMember(id)
				store.holdAcks.Store(nil)
				select {
				case <-store.held: // a second held request, if any
				default:
				}
				f.waitStable()
				if k == 1 {
					// The paused write wakes up after its partition has a
					// new owner: the store must refuse it.
					close(store.resume)
					err := <-store.paused
					assert.ErrorIs(t, err, fence.ErrStale, "a write from the crashed owner was accepted")
				}
			}
			t1 := time.Now()
			f.start(id)
			f.waitStable()
			t.Logf("restarted %s %s in %v (down %v, rejoin %v)", id, how, time.Since(t0).Round(time.Millisecond),
				t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)

	// The store is quiescent now; read it under its gate's lock.
	_ = store.gate.Do(fence.Token{Scope: "read", Epoch: 1}, func() error {
		var sumAcked, sumCounted int64
		issued = int64(len(ackedIdem) + len(lost))
		for k := range nkeys {
			key := "key-" + strconv.Itoa(k)
			assert.Equal(t, acked[key], store.counts[key], "key %s: counted != acknowledged", key)
			sumAcked += acked[key]
			sumCounted += store.counts[key]
		}
		for idem, n := range store.applied {
			assert.Equal(t, 1, n, "increment %s applied %d times", idem, n)
			assert.True(t, ackedIdem[idem], "increment %s applied but never acknowledged", idem)
		}
		for idem := range ackedIdem {
			assert.Equal(t, 1, store.applied[idem], "increment %s acknowledged but not applied", idem)
		}
		assert.Empty(t, lost, "increments without a definite answer")
		assert.GreaterOrEqual(t, issued, int64(total))
		assert.Equal(t, issued, sumAcked)
		assert.Equal(t, issued, sumCounted)
		assert.Zero(t, store.staleAccepted, "stale writes accepted")
		assert.Zero(t, store.unadvanced, "writes under an epoch no fencer saw")
		return nil
	})
	assert.LessOrEqual(t, store.maxHops.Load(), int64(1), "a request was forwarded more than once")
	assert.Zero(t, store.tokenMismatches.Load())
	st := c.Stats()
	t.Logf("%d increments in %v (%.0f/s) across %d rolling restarts: %d client attempts, %d retries, "+
		"%d failures reported to the caller, %d forwarded once, %d duplicates absorbed, %d stale rejected",
		issued, elapsed.Round(time.Millisecond), float64(issued)/elapsed.Seconds(), nodes, st.Attempts, st.Retries,
		reported.Load(), store.forwarded.Load(), store.duplicates.Load(), store.staleRejected.Load())
}
