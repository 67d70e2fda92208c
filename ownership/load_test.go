package ownership

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestLoadMeterSmooths: the meter's rate is an exponentially weighted
// moving average whose weight depends on the elapsed time, not on how
// often it ticks; partitions the node does not serve are reset and left
// out of the report; reports round to three significant digits.
func TestLoadMeterSmooths(t *testing.T) {
	m := newLoadMeter(4)
	owned := []int{0, 1}
	for range 600 { // 60s of 100 units/s on partition 0, ticking every 100ms
		m.add(0, 10)
		m.add(2, 10)
		m.tick(100*time.Millisecond, time.Minute, owned)
	}
	assert.InDelta(t, 100*(1-math.Exp(-1)), m.rates[0], 0.5, "one window: 1-1/e of the way")
	assert.Zero(t, m.rates[2], "not served")
	coarse := newLoadMeter(1)
	coarse.add(0, 6000)
	coarse.tick(time.Minute, time.Minute, []int{0})
	assert.InDelta(t, m.rates[0], coarse.rates[0], 0.5, "the same minute ticked once")
	r := m.report(time.Minute, owned)
	assert.Equal(t, []int{0}, r.Partitions, "no load, no entry")
	assert.Equal(t, round3(m.rates[0]), r.Loads[0])
	assert.Equal(t, 63.2, round3(63.2120558))
	assert.Equal(t, 0.00123, round3(0.001234))
	assert.Zero(t, round3(math.NaN()))
}

// TestNodePublishesLoad: Hold counts one unit and AddPartitionLoad adds
// custom units on the partition; the node publishes the smoothed loads of
// the partitions it serves under its lease, and the report goes with the
// lease when the node leaves.
func TestNodePublishesLoad(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "load"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig(t, name, "a", 8)
	cfg.LoadInterval = 20 * time.Millisecond
	cfg.LoadWindow = 200 * time.Millisecond
	a := join(t, cli, cfg)
	waitStable(t, 20*time.Second, a)
	require.ErrorIs(t, a.AddPartitionLoad(8, 1), fleet.ErrInvalidPartition)

	key := keys.New(name).Load("a")
	w := cli.Watch(ctx, key)
	var got keys.LoadReport
	var lease int64
	for done := false; !done; {
		for range 50 {
			h, err := a.HoldPartition(3)
			require.NoError(t, err)
			h.Release()
		}
		require.NoError(t, a.AddPartitionLoad(5, 1000))
		select {
		case resp := <-w:
			require.NoError(t, resp.Err())
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				r, err := keys.DecodeLoadReport(ev.Kv.Value)
				require.NoError(t, err)
				got, lease = r, ev.Kv.Lease
				i3, i5 := slices.Index(r.Partitions, 3), slices.Index(r.Partitions, 5)
				done = i3 >= 0 && i5 >= 0 && r.Loads[i5] > r.Loads[i3]
			}
		case <-ctx.Done():
			t.Fatalf("no load report with partitions 3 and 5; last %+v", got)
		}
	}
	assert.Equal(t, []int{3, 5}, got.Partitions, "only the partitions with load")
	assert.Equal(t, 0.2, got.Window)
	members, err := cli.Get(ctx, keys.New(name).Member("a"))
	require.NoError(t, err)
	assert.Equal(t, members.Kvs[0].Lease, lease, "bound to the node's lease")

	closeNode(t, a)
	resp, err := cli.Get(ctx, key)
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "the report goes with the lease")
}
