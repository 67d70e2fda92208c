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
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestResizeUnderLoad resizes a fleet of three nodes from 64 partitions
// to 256, 1,024 and back to 256 while keyed Add calls run through a
// grpcroute.Conn against the fleet's fenced store: no call fails at the
// caller, every acknowledged increment is counted exactly once, and after
// each resize every node serves its partitions by the new count and names
// the same holder for every sampled key.
func TestResizeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("three resizes under load")
	}
	const name, keys = "resize", 64
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, name, false)
	f.partitions = 64
	f.startStable("a", "b", "c")
	_, counter := newClient(t, f.cli, name, grpcroute.ClientConfig{})
	op, err := fleet.NewOperator(f.cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	var (
		acked  [keys]atomic.Int64
		calls  atomic.Int64
		failed atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		errMu  sync.Mutex
		errs   []error
	)
	for range 4 {
		wg.Go(func() {
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
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					continue
				}
				acked[k].Add(1)
			}
		})
	}
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer stopLoad()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, to := range []int{256, 1024, 256} {
		before := calls.Load()
		rep, err := op.Resize(ctx, to, fleet.ResizeOptions{Actor: "test", Reason: "under load", Budget: 64})
		require.NoError(t, err)
		require.True(t, rep.Completed)
		require.NoError(t, fleettest.WaitFor(30*time.Second, func() error {
			for _, m := range f.list() {
				if p := m.node.Ring().Partitions(); p != to {
					return fmt.Errorf("%s uses %d partitions", m.id, p)
				}
			}
			return fleettest.StableAtErr(f.nodes(), nil)
		}, fleettest.Changes(f.nodes()...)...))
		for i := range 128 {
			key := fmt.Sprintf("sample-%d", i)
			want := f.list()[0].node.Lookup(key)
			require.Equal(t, ring.PartitionOf(key, to), want.Partition)
			for _, m := range f.list()[1:] {
				got := m.node.Lookup(key)
				require.Equal(t, [3]any{want.Partition, want.Owner, want.Epoch}, [3]any{got.Partition, got.Owner, got.Epoch}, "%s at %s", key, m.id)
			}
		}
		t.Logf("resize %d -> %d: took %v, %d driver writes; %d calls meanwhile", rep.From, rep.To,
			time.Duration(rep.Took).Round(time.Millisecond), rep.Writes, calls.Load()-before)
	}
	stopLoad()

	errMu.Lock()
	defer errMu.Unlock()
	require.Zero(t, failed.Load(), "calls failed at the caller: %v", errs)
	var total int64
	for k := range keys {
		assert.Equal(t, acked[k].Load(), f.store.value(fmt.Sprintf("k%d", k)), "key k%d", k)
		total += acked[k].Load()
	}
	t.Logf("%d calls, %d increments acknowledged, each counted once; 0 failed", calls.Load(), total)
}
