package router_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestClientReadsSpec: a Client told nothing of the fleet's partitions
// reads them from the spec and routes every key exactly as the nodes do; a
// ClientConfig that asserts another partition count, load factor or ring
// algorithm is refused.
func TestClientReadsSpec(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "spec", fleetOptions{Partitions: 16})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "spec"})
	waitClientAgrees(t, c, f)
	for _, m := range f.list() {
		for i := range 1000 {
			key := "k" + strconv.Itoa(i)
			want, got := m.node.Lookup(key), c.Lookup(key)
			require.Equal(t, want.Partition, got.Partition, "key %s", key)
			require.Equal(t, want.Owner, got.Owner, "key %s", key)
			require.Equal(t, want.Epoch, got.Epoch, "key %s", key)
		}
	}

	cli := etcd.NewClient(t)
	ctx := context.Background()
	asserted, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "spec", Partitions: 16, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted})
	require.NoError(t, err, "an assertion that holds")
	asserted.Close()
	for _, cfg := range []router.ClientConfig{
		{Cluster: "spec", Partitions: 1024},
		{Cluster: "spec", LoadFactor: 2},
		{Cluster: "spec", Algorithm: ring.AlgorithmBounded},
	} {
		_, err := router.NewClient(ctx, cli, cfg)
		require.ErrorIs(t, err, ring.ErrSpecMismatch, "%+v", cfg)
		require.ErrorIs(t, err, ring.ErrSpecMismatch)
		var sm *ring.SpecMismatchError
		require.ErrorAs(t, err, &sm)
		assert.Equal(t, 16, sm.Fleet.Partitions)
		assert.Contains(t, err.Error(), "in the fleet")
	}
}

// TestClientWaitsForSpec: before any node has joined, NewClient waits for
// the spec, says so, and returns once the first node created it.
func TestClientWaitsForSpec(t *testing.T) {
	etcd := cluster.New(t, 1)
	logs := &testsupport.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	type result struct {
		c   *router.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := router.NewClient(ctx, etcd.NewClient(t), router.ClientConfig{Cluster: "late", Logger: log})
		done <- result{c, err}
	}()
	require.Eventually(t, func() bool { return bytes.Contains(logs.Bytes(), []byte("no spec yet")) },
		10*time.Second, 10*time.Millisecond, "NewClient says nothing of the missing spec")
	select {
	case r := <-done:
		t.Fatalf("NewClient returned before the spec existed: %v", r.err)
	default:
	}
	f := newFleet(t, etcd, "late", fleetOptions{Partitions: 8})
	f.start("first")
	r := <-done
	require.NoError(t, r.err)
	defer r.c.Close()
	f.waitStable()
	waitClientAgrees(t, r.c, f)

	// When ctx ends first, the error says that there is no spec.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := router.NewClient(ctx, etcd.NewClient(t), router.ClientConfig{Cluster: "never"})
	require.ErrorIs(t, err, fleet.ErrNoSpec)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestClientEtcdDown: with etcd unreachable, NewClient logs why it waits
// and, when its context ends, returns an error wrapping ErrUnavailable
// that names the last cause.
func TestClientEtcdDown(t *testing.T) {
	cli := cluster.UnreachableClient(t)
	logs := &testsupport.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "down", Logger: log})
	require.ErrorIs(t, err, ownership.ErrUnavailable)
	require.ErrorIs(t, err, ownership.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "connection refused", "the message names the cause")
	assert.Contains(t, logs.String(), "etcd does not answer", "a warning while waiting")
	assert.Contains(t, logs.String(), "connection refused", "the warning names the cause")
	t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
