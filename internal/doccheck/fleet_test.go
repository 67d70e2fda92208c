package doccheck

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// nodeConfig returns a fast node configuration of fleet cluster: TTL 2s
// (etcd's minimum), parts partitions, the address fleettest.StableErr
// expects, and logger (nil: none).
func nodeConfig(cluster, id string, parts int, logger hclog.Logger) ownership.Config {
	cfg := ownership.DefaultConfig()
	cfg.Cluster = cluster
	cfg.NodeID = id
	cfg.Addr = id + ".test:7000"
	cfg.Ring.Partitions = parts
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	cfg.Logger = logger
	return cfg
}

// join joins a node, which leaves when the test ends unless closed
// before.
func join(t *testing.T, cli ownership.Client, cfg ownership.Config) *ownership.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("join %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { leave(t, n) })
	return n
}

// leave closes n; closing it again does nothing.
func leave(t *testing.T, n *ownership.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Errorf("close %s: %v", n.ID(), err)
	}
}

// waitStable waits until nodes agree on a ring of their IDs and every
// partition is served by its ring owner.
func waitStable(t *testing.T, nodes ...*ownership.Node) {
	t.Helper()
	err := fleettest.WaitFor(30*time.Second, func() error { return fleettest.StableErr(nodes) }, fleettest.Changes(nodes...)...)
	if err != nil {
		t.Fatal(err)
	}
}

// waitUntil waits, on the nodes' changes, until cond returns nil.
func waitUntil(t *testing.T, cond func() error, nodes ...*ownership.Node) {
	t.Helper()
	if err := fleettest.WaitFor(30*time.Second, cond, fleettest.Changes(nodes...)...); err != nil {
		t.Fatal(err)
	}
}
