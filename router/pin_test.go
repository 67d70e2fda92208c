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
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestPinMovesInvisibly: an operator's pins move partitions under
// continuous keyed load through a Client from outside the fleet, and each
// pin is a planned move: the partition is claimed by the pinned node at a
// higher epoch, not one request fails at the caller, and every
// acknowledged increment is counted exactly once. Unpinning moves them back
// the same way.
func TestPinMovesInvisibly(t *testing.T) {
	const (
		nodes, partitions, workers, nkeys, pins = 4, 64, 8, 128, 8
	)
	name := "pin-moves"
	etcd := cluster.New(t, 1)
	store := newCounterStore()
	store.workTime = 2 * time.Millisecond
	f := newFleet(t, etcd, name, fleetOptions{Partitions: partitions, Fencers: []fence.Fencer{store}, Handler: store.handler})
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = "node-" + strconv.Itoa(i)
		f.start(ids[i])
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: name})
	waitClientAgrees(t, c, f)
	op, err := fleet.NewOperator(f.cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
				require.NoError(t, err)
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
	// placedEverywhere waits until every node's ring places p on owner.
	placedEverywhere := func(p int, owner string) {
		waitUntil(t, 30*time.Second, "pin not seen", func() (string, <-chan struct{}) {
			for _, m := range f.list() {
				ch := m.node.Changed()
				if got, _ := m.node.Ring().Owner(p); got != owner {
					return fmt.Sprintf("%s: partition %d on %s, want %s", m.id, p, got, owner), ch
				}
			}
			return "", nil
		})
	}

	who := fleet.Action{Actor: "test", Reason: "move under load"}
	view := f.get(ids[0]).node
	for k := range pins {
		p := f.partitionOf("key-" + strconv.Itoa(k))
		before := view.LookupPartition(p)
		target := ids[(k+1)%nodes]
		if target == before.Owner {
			target = ids[(k+2)%nodes]
		}
		_, err := op.Pin(ctx, p, target, who)
		require.NoError(t, err)
		placedEverywhere(p, target)
		f.waitStable()
		after := view.LookupPartition(p)
		require.Equal(t, target, after.Owner, "partition %d pinned on %s", p, target)
		assert.Greater(t, after.Epoch, before.Epoch, "partition %d moved at a new epoch", p)
		_, err = op.Unpin(ctx, p, who)
		require.NoError(t, err)
		ringOwner, _ := view.Ring().RingOwner(p)
		placedEverywhere(p, ringOwner)
		f.waitStable()
	}
	waitClientAgrees(t, c, f)
	for next.Load() < 2000 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // let the load run past the moves
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
	t.Logf("%d increments acknowledged across %d pins and unpins, %d failed at the caller", next.Load(), pins, len(failures))
}
