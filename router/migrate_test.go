package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestAlgorithmMigrationInvisible migrates a running fleet of three nodes
// from the count-only ring to the weighted one, and back, under keyed load
// through a Client from outside the fleet against a fenced store: every
// step is a batch of planned moves, the change of the spec's algorithm
// moves nothing, not one request fails at the caller, and every
// acknowledged increment is counted exactly once. The moves, steps and
// time are logged.
func TestAlgorithmMigrationInvisible(t *testing.T) {
	const (
		nodes, partitions, workers, nkeys, budget = 3, 128, 8, 256, 8
	)
	name := "algo-migrate"
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A fleet of the count-only ring, as one created before the weighted
	// ring was the default.
	_, err := cli.Put(ctx, keys.New(name).Spec(), fmt.Sprintf(`{"partitions":%d,"load_factor":1.25,"ring_algorithm":1}`, partitions))
	require.NoError(t, err)
	store := newCounterStore()
	store.workTime = time.Millisecond
	f := newFleet(t, etcd, name, fleetOptions{Partitions: partitions, Fencers: []fence.Fencer{store}, Handler: store.handler})
	for i := range nodes {
		f.start("node-" + strconv.Itoa(i))
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: name})
	waitClientAgrees(t, c, f)
	op, err := fleet.NewOperator(f.cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	var (
		next     atomic.Int64
		stop     = make(chan struct{})
		mu       sync.Mutex
		acked    = map[string]int64{}
		failures []string
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1) - 1
				key := "key-" + strconv.FormatInt(i%nkeys, 10)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+key, http.NoBody)
				if err != nil {
					panic(err)
				}
				req.Header.Set(router.HeaderIdempotencyKey, "inc-"+strconv.FormatInt(i, 10))
				resp, err := c.Do(ctx, key, req)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s: %s", resp.Status, body)
					}
				}
				mu.Lock()
				if err == nil {
					acked[key]++
				} else if ctx.Err() == nil {
					failures = append(failures, key+": "+err.Error())
				}
				mu.Unlock()
			}
		})
	}
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()

	who := fleet.Action{Actor: "test", Reason: "migrate under load"}
	for _, target := range []ring.Algorithm{ring.AlgorithmWeighted, ring.AlgorithmBounded} {
		dry, err := op.MigrateAlgorithm(ctx, fleet.Migration{Target: target, Budget: budget, DryRun: true}, who)
		require.NoError(t, err)
		require.Positive(t, dry.Moves, "the %v ring moves partitions", target)
		before := next.Load()
		t0 := time.Now()
		done, err := op.MigrateAlgorithm(ctx, fleet.Migration{Target: target, Budget: budget}, who)
		require.NoError(t, err)
		took := time.Since(t0)
		require.True(t, done.Done)
		for _, m := range f.list() {
			waitUntil(t, 30*time.Second, "node follows the spec", func() (string, <-chan struct{}) {
				ch := m.node.Changed()
				if got := m.node.Ring().Algorithm(); got != target {
					return fmt.Sprintf("%s computes the %v ring", m.id, got), ch
				}
				return "", nil
			})
		}
		f.waitStable()
		waitClientAgrees(t, c, f)
		st, err := op.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, target, st.Spec.RingAlgorithm)
		require.Nil(t, st.Migration)
		parts, err := op.Partitions(ctx)
		require.NoError(t, err)
		recs, err := op.Audit(ctx, t0)
		require.NoError(t, err)
		var flip fleet.AuditRecord
		for _, r := range recs {
			if r.Action == "algorithm-flip" {
				flip = r
			}
		}
		require.NotZero(t, flip.Revision, "the flip is audited")
		for _, ps := range parts {
			require.Empty(t, ps.Placed, "partition %d: no placement left", ps.Partition)
			require.Less(t, ps.Epoch, flip.Revision, "partition %d: claimed before the flip (the flip moves nothing)", ps.Partition)
		}
		t.Logf("budget %d: migration to %v: %d moves in %d steps (dry run: %d in %d), %v, %d requests meanwhile",
			budget, target, dry.Moves, done.Steps, dry.Moves, dry.Steps, took.Round(time.Millisecond), next.Load()-before)
	}
	halt()

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
		}
		assert.Zero(t, store.staleAccepted, "stale writes accepted")
		return nil
	})
	t.Logf("%d increments acknowledged across two migrations, %d failed at the caller", next.Load(), len(failures))
}
