package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// The nodes these tests observe and operate are the ownership package's;
// these helpers start and wait for them as ownership's own tests do.

// testConfig returns a fast configuration for tests: TTL 2s (etcd's
// minimum), a small ring, quiet logs unless -v.
func testConfig(t testing.TB, cluster, id string, partitions int) ownership.Config {
	cfg := ownership.DefaultConfig()
	cfg.Cluster = cluster
	cfg.NodeID = id
	cfg.Addr = id + ".test:7000"
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	if testing.Verbose() {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	}
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// join joins a node and closes it when the test ends.
func join(t testing.TB, cli ownership.Client, cfg ownership.Config) *ownership.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := ownership.Join(ctx, cli, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeNode(t, n) })
	return n
}

// joinWithEvents joins a node whose callbacks are ChanCallbacks(buffer),
// and returns it with the events channel and the drop counter.
func joinWithEvents(t testing.TB, cli ownership.Client, cfg ownership.Config, buffer int) (*ownership.Node, <-chan ownership.Event, func() uint64) {
	t.Helper()
	cb, events, dropped := ownership.ChanCallbacks(buffer)
	cfg.Callbacks = cb
	return join(t, cli, cfg), events, dropped
}

func closeNode(t testing.TB, n *ownership.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = n.Close(ctx)
}

// stableErr returns nil once nodes agree on a ring of exactly their IDs and
// every partition is served by its ring owner, as every node sees it.
func stableErr(nodes []*ownership.Node) error { return fleettest.StableErr(nodes) }

// waitStable waits, on the nodes' Changed signals, until stableErr is nil.
func waitStable(t testing.TB, timeout time.Duration, nodes ...*ownership.Node) {
	t.Helper()
	require.NoError(t, waitFor(timeout, func() error { return stableErr(nodes) }, nodes...))
}

// waitFor re-evaluates cond whenever one of the nodes publishes a new
// routing snapshot, until it returns nil or timeout passes.
func waitFor(timeout time.Duration, cond func() error, nodes ...*ownership.Node) error {
	return fleettest.WaitFor(timeout, cond, fleettest.Changes(nodes...)...)
}

// etcdClaims returns the owner and epoch of every claim in etcd.
func etcdClaims(t testing.TB, cli *clientv3.Client, cluster string) map[int]fleettest.Claim {
	return fleettest.EtcdClaims(t, cli, cluster)
}

// createSpec stores the fleet's spec s as the first node to join does.
func createSpec(ctx context.Context, cli clientv3.KV, l keys.Layout, s ring.Spec) error {
	_, err := fleetview.EnsureSpec(ctx, cli, l, s.Config(), false)
	return err
}
