package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

const (
	authFleet      = "auth-a" // the fleet of the tests with authentication on
	authOtherFleet = "auth-b" // another tenant's fleet on the same etcd
	fleetUser      = "fleet-a"
	fleetPassword  = "fleet-a-password"
	otherUser      = "fleet-b"
	otherPassword  = "fleet-b-password"
)

// newAuthCluster starts an etcd with authentication on and a short
// auth-token TTL (cluster.AuthTokenTTL):
// the root user and two tenants, fleetUser and otherUser, whose roles may
// only read and write the prefix of their own fleet, authFleet and
// authOtherFleet.
func newAuthCluster(t *testing.T) *cluster.AuthCluster {
	t.Helper()
	return cluster.NewWithAuth(t,
		cluster.User{Name: fleetUser, Password: fleetPassword, Prefix: keys.DefaultPrefix(authFleet)},
		cluster.User{Name: otherUser, Password: otherPassword, Prefix: keys.DefaultPrefix(authOtherFleet)})
}

// TestAuthTokenExpiry runs a fleet whose etcd user may touch nothing but the
// fleet's prefix, on an etcd whose auth tokens expire after a second unused.
// Across several expiries no session ends and no partition changes epoch;
// then a node joins on a client whose watch streams (an Observer's, the
// first node's) were opened before the expiries, claims its partitions and
// raises their floors, and every node and both Observers, one opened before
// the expiries and one after, agree on the new routes. No watch spins on a
// refused token, and no Observer has to read the fleet again.
func TestAuthTokenExpiry(t *testing.T) {
	c := newAuthCluster(t)
	const parts = 16
	cliA := c.NewClientAs(t, fleetUser, fleetPassword) // one process: an Observer and a node
	cliB := c.NewClientAs(t, fleetUser, fleetPassword)
	scfg := etcdfence.DefaultConfig()
	scfg.Cluster = authFleet
	scfg.Prefix = keys.DefaultPrefix(authFleet) + "data/" // the role reaches nothing else
	store, err := etcdfence.New(cliB, scfg)
	require.NoError(t, err)
	config := func(id string) Config {
		cfg := testConfig(t, authFleet, id, parts)
		cfg.Fencers = []fence.Fencer{store}
		return cfg
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ocfg := fleet.ObserverConfig{Cluster: authFleet, Ring: testConfig(t, authFleet, "x", parts).Ring}
	a := join(t, cliA, config("a"))
	o, err := fleet.Observe(ctx, cliA, ocfg)
	require.NoError(t, err)
	defer o.Close()
	b := join(t, cliB, config("b"))
	waitStable(t, 20*time.Second, a, b)
	before := servedEpochs(t, []*Node{a, b}, parts)
	leases := []string{a.Status().Lease, b.Status().Lease}

	for i := range 2 {
		cluster.OutliveTokens()
		require.NoError(t, stableErr([]*Node{a, b}), "after expiry %d", i+1)
		require.Equal(t, before, servedEpochs(t, []*Node{a, b}, parts), "epochs after expiry %d", i+1)
		require.Equal(t, leases, []string{a.Status().Lease, b.Status().Lease}, "sessions after expiry %d", i+1)
	}

	late, err := fleet.Observe(ctx, cliA, ocfg) // its watches come after the expiries
	require.NoError(t, err)
	defer late.Close()
	n := join(t, cliA, config("c")) // and so do the node's
	waitStable(t, 20*time.Second, a, b, n)
	for _, o := range []*fleet.Observer{o, late} {
		waitObserver(t, o, func() error { return observerAgrees(o, n, parts) }, a, b, n)
	}
	for _, p := range n.Owned() {
		epoch := n.LookupPartition(p).Epoch
		_, err := store.Put(ctx, fence.Token{Scope: fence.PartitionScope(p), Epoch: epoch}, "k", []byte("v"))
		require.NoError(t, err, "partition %d epoch %d", p, epoch)
	}
	cluster.OutliveTokens()
	require.NoError(t, stableErr([]*Node{a, b, n}))
	assert.Equal(t, []string{a.Status().Lease, b.Status().Lease}, leases, "sessions")
	assert.Zero(t, o.Resyncs(), "the Observer opened before the expiries read the fleet again")
	assert.Zero(t, late.Resyncs(), "the Observer opened after the expiries read the fleet again")
	t.Logf("requests refused for an expired token: %d", c.Refusals())
	assert.LessOrEqual(t, c.Refusals(), c.MaxRefusals(2), "refusals for an expired token: a watch spins on one")
}

// TestAuthOtherTenant: a node whose etcd user's role covers another
// fleet's prefix only is refused at Join at once, with an error that wraps
// etcd's permission denied (no retries until the context ends), and so is
// an Observer; the fleet's own user joins with nothing more than its role.
func TestAuthOtherTenant(t *testing.T) {
	c := newAuthCluster(t)
	const parts = 8
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	own := join(t, c.NewClientAs(t, fleetUser, fleetPassword), testConfig(t, authFleet, "a", parts))
	waitStable(t, 20*time.Second, own)

	other := c.NewClientAs(t, otherUser, otherPassword)
	n, err := Join(ctx, other, testConfig(t, authFleet, "intruder", parts))
	if n != nil {
		closeNode(t, n)
	}
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
	require.NoError(t, ctx.Err(), "Join must not wait for its context to end")
	assert.NotContains(t, etcdMembers(t, c.NewClientAs(t, fleetUser, fleetPassword), authFleet), "intruder")

	_, err = fleet.Observe(ctx, other, fleet.ObserverConfig{Cluster: authFleet, Ring: testConfig(t, authFleet, "x", parts).Ring})
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
	require.NoError(t, ctx.Err())

	// The other tenant's fleet runs beside it, each under its own prefix.
	theirs := join(t, other, testConfig(t, authOtherFleet, "b", parts))
	waitStable(t, 20*time.Second, theirs)
	require.NoError(t, stableErr([]*Node{own}))
}
