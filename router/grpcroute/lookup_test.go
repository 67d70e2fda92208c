package grpcroute_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// A Conn's Lookup names where its calls for a key go, as the fleet's
// nodes see it, kept current by the watch when partitions move: the zero
// Route before the connection has read the fleet, then the owner, its
// address, epoch and ring version, which serve the calls.
func TestConnLookup(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "lookup", false)
	f.startStable("a", "b", "c")
	c, err := grpcroute.NewClient(f.cli, grpcroute.ClientConfig{Key: requestKey})
	require.NoError(t, err)
	conn, err := c.NewConn(grpcroute.Target("lookup"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		c.Close()
	})
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	assert.Equal(t, fleet.Route{}, conn.Lookup(keys[0]), "a connection that has not read the fleet knows no route")

	// agrees reports how the connection's routes differ from the nodes'.
	agrees := func() error {
		for _, key := range keys {
			want := f.owner(key)
			if want == nil {
				return fmt.Errorf("key %s: no node serves it", key)
			}
			w, got := want.node.Lookup(key), conn.Lookup(key)
			if got.Partition != w.Partition || got.Owner != w.Owner || got.Addr != want.addr || got.Epoch != w.Epoch || got.RingVersion != w.RingVersion {
				return fmt.Errorf("key %s: connection sees %+v, owner %s serves %+v", key, got, want.id, w)
			}
		}
		return nil
	}
	wait := func() {
		t.Helper()
		changes := []func() <-chan struct{}{conn.Changed}
		for _, m := range f.list() {
			changes = append(changes, m.node.Changed)
		}
		require.NoError(t, fleettest.WaitFor(20*time.Second, agrees, changes...))
	}
	conn.Connect()
	wait()
	assert.Zero(t, testing.AllocsPerRun(100, func() { conn.Lookup(keys[1]) }), "Lookup allocates")

	counter := counterpb.NewCounterClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := func() {
		t.Helper()
		for _, key := range keys {
			r := conn.Lookup(key)
			reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
			require.NoError(t, err)
			assert.Equal(t, r.Owner, reply.Node, "key %s", key)
			assert.Equal(t, r.Epoch, reply.Epoch, "key %s", key)
		}
	}
	served()

	// c leaves: its partitions move, and the connection follows.
	f.stopMember("c")
	f.waitStable()
	wait()
	for _, key := range keys {
		assert.NotEqual(t, "c", conn.Lookup(key).Owner, "key %s", key)
	}
	served()
	assert.Zero(t, c.Stats().Retries, "calls went where Lookup said")
}
