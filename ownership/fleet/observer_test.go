package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// observerAgrees reports how o's routes differ from n's, nil if they do
// not: owner, address and epoch of every partition.
func observerAgrees(o *fleet.Observer, n *ownership.Node, parts int) error {
	return fleettest.ObserverAgrees(o, n, parts)
}

// waitObserver waits, on the observer's and the nodes' Changed signals,
// until cond returns nil.
func waitObserver(t *testing.T, o *fleet.Observer, cond func() error, nodes ...*ownership.Node) {
	t.Helper()
	fleettest.WaitObserver(t, o, cond, nodes...)
}

// TestObserverFollowsTheFleet: an Observer outside the fleet, which reads
// through the nodes' own reader, routes every partition (and looks every
// key up) as the nodes do,
// across a join and a graceful leave.
func TestObserverFollowsTheFleet(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts = 16
	a := join(t, cli, testConfig(t, "observe", "a", parts))
	waitStable(t, 20*time.Second, a)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "observe", Ring: ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor}})
	require.NoError(t, err)
	defer o.Close()
	require.NoError(t, observerAgrees(o, a, parts))
	for i := range 100 { // Lookup(key) is the route of key's partition, as every node computes it
		key := fmt.Sprintf("key-%d", i)
		got, want := o.Lookup(key), a.Lookup(key)
		require.Equal(t, ring.PartitionOf(key, parts), got.Partition, key)
		require.Equal(t, want.Partition, got.Partition, key)
		require.Equal(t, "a", got.Owner, key)
		require.Equal(t, want.Epoch, got.Epoch, key)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = o.Lookup("some-key") }))
	assert.Positive(t, o.Revision())
	assert.Equal(t, fleet.Route{Partition: parts}, o.LookupPartition(parts))
	assert.Equal(t, fleet.Route{Partition: -1}, o.LookupPartition(-1))

	b := join(t, cli, testConfig(t, "observe", "b", parts))
	waitStable(t, 20*time.Second, a, b)
	waitObserver(t, o, func() error { return observerAgrees(o, a, parts) }, a, b)
	assert.Zero(t, o.Resyncs())

	closeNode(t, b)
	waitStable(t, 20*time.Second, a)
	waitObserver(t, o, func() error { return observerAgrees(o, a, parts) }, a)
	for p := range parts {
		assert.Equal(t, "a", o.LookupPartition(p).Owner)
	}
	o.Close()
	o.Close() // idempotent
}

func TestObserveErrors(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := ring.DefaultConfig()

	_, err := fleet.Observe(ctx, nil, fleet.ObserverConfig{Cluster: "x", Ring: rc})
	assert.ErrorIs(t, err, fleet.ErrNilArgument)
	var none *clientv3.Client
	_, err = fleet.Observe(ctx, none, fleet.ObserverConfig{Cluster: "x", Ring: rc})
	assert.ErrorIs(t, err, fleet.ErrNilArgument, "a typed nil")
	for _, cfg := range []fleet.ObserverConfig{
		{Ring: rc},
		{Cluster: "x\x00", Ring: rc},
		{Cluster: "x"},
		{Cluster: "x", Ring: ring.Config{Partitions: 8, LoadFactor: 0.5}},
	} {
		_, err = fleet.Observe(ctx, cli, cfg)
		assert.ErrorIs(t, err, fleet.ErrInvalidConfig, "%+v", cfg)
	}

	// No spec yet: an Observer that leaves the algorithm to the fleet's
	// spec cannot know it.
	_, err = fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "mismatch", Ring: ring.Config{Partitions: 16, LoadFactor: 1.25}})
	assert.ErrorIs(t, err, fleet.ErrNoSpec)

	// Another partition count than the spec's.
	a := join(t, cli, testConfig(t, "mismatch", "a", 16))
	waitStable(t, 20*time.Second, a)
	_, err = fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "mismatch", Ring: ring.Config{Partitions: 8, LoadFactor: 1.25}})
	assert.ErrorIs(t, err, ring.ErrSpecMismatch)

	// A claim beyond the spec's partition count: the fleet's keys
	// contradict its spec.
	fleettest.NewHandmade(t, cli, "beyond").Spec(8)
	fleettest.NewHandmade(t, cli, "beyond").Claim(12, "n1")
	_, err = fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "beyond", Ring: ring.Config{Partitions: 8, LoadFactor: 1.25}})
	assert.ErrorIs(t, err, ring.ErrSpecMismatch)
}
