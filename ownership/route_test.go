package ownership

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestNodeAndObserverRouteAlike: a Node and an Observer of one fleet name
// the same owner, address and epoch for every partition, whatever the
// claim holder published: b advertises no address, and partition 0 is
// claimed by "ghost", which holds a live claim but is no member (so has no
// address and no place on the ring). The holder of a standing claim is the
// route in both views, with an empty address where it has none.
func TestNodeAndObserverRouteAlike(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts, name = 8, "alike"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	ghost, err := cli.Put(ctx, keys.New(name).Claim(0), keys.EncodeClaim("ghost", time.Now()), clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.Revoke(context.Background(), lease.ID) })

	a := join(t, cli, testConfig(t, name, "a", parts))
	cfgB := testConfig(t, name, "b", parts)
	cfgB.Addr = ""
	b := join(t, cli, cfgB)
	nodes := []*Node{a, b}
	require.NoError(t, waitFor(20*time.Second, func() error {
		for _, n := range nodes {
			if m := n.Ring().Members(); len(m) != 2 {
				return fmt.Errorf("%s sees members %v", n.ID(), m)
			}
		}
		for p := 1; p < parts; p++ {
			owner, _ := a.Ring().Owner(p)
			n := map[string]*Node{"a": a, "b": b}[owner]
			if r := n.LookupPartition(p); !r.Local {
				return fmt.Errorf("partition %d: ring owner %s does not serve it: %+v", p, owner, r)
			}
		}
		return nil
	}, nodes...))
	require.NotEmpty(t, b.Owned(), "b serves partitions without an address")

	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: cfgB.Ring})
	require.NoError(t, err)
	defer o.Close()
	waitObserver(t, o, func() error {
		for _, n := range nodes {
			if err := observerAgrees(o, n, parts); err != nil {
				return fmt.Errorf("%s: %w", n.ID(), err)
			}
		}
		return nil
	}, nodes...)

	for _, n := range nodes {
		r := n.LookupPartition(0)
		assert.Equal(t, "ghost", r.Owner, "%s: the claim's holder is the route", n.ID())
		assert.Equal(t, ghost.Header.Revision, r.Epoch)
		assert.Empty(t, r.Addr)
	}
	for _, p := range b.Owned() {
		r := o.LookupPartition(p)
		assert.Equal(t, "b", r.Owner)
		assert.Empty(t, r.Addr)
		assert.Equal(t, b.LookupPartition(p).Epoch, r.Epoch)
	}
}
