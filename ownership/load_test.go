package ownership

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

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
