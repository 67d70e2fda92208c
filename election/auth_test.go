package election_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

const (
	fleetUser     = "fleet-test"
	fleetPassword = "fleet-test-password"
	otherUser     = "fleet-other"
	otherPassword = "fleet-other-password"
)

// newAuthCluster starts an etcd with authentication on and a short
// auth-token TTL (cluster.AuthTokenTTL):
// the root user and two tenants, fleetUser, whose role may only read and
// write the test elections' prefix, and otherUser, whose role may only read
// and write another prefix.
func newAuthCluster(t *testing.T) *cluster.AuthCluster {
	t.Helper()
	return cluster.NewWithAuth(t,
		cluster.User{Name: fleetUser, Password: fleetPassword, Prefix: "/tenure/" + testCluster + "/"},
		cluster.User{Name: otherUser, Password: otherPassword, Prefix: "/tenure/other/"})
}

// TestAuthTokenExpiry: with authentication on, a role limited to the
// elections' prefix and auth tokens that expire after a second unused,
// across several expiries: sessions renew and keep their leases, a leader
// keeps its term, a Campaign blocked before the expiries wins when the
// leader resigns after them, a Campaign begun after them wins in turn, and
// Observe streams, begun before and after, see every leader, on clients
// whose watch streams were opened before the tokens expired. No watch spins
// on a refused token.
func TestAuthTokenExpiry(t *testing.T) {
	c := newAuthCluster(t)
	ctx := testCtx(t)
	cli1, cli2, cli3 := c.NewClientAs(t, fleetUser, fleetPassword), c.NewClientAs(t, fleetUser, fleetPassword), c.NewClientAs(t, fleetUser, fleetPassword)
	con := newContest(t, ctx, cli1, cli2, "auth")
	obs2 := con.e2.Observe(ctx) // a long-lived watch on the blocked candidate's client
	require.Equal(t, "n1", recv(t, obs2, "n2's first observation").Leader.ID)
	s3 := newSession(t, cli3, shortTTL)
	e3 := newElection(t, s3, cli3, "auth", "n3")
	obs3 := e3.Observe(ctx) // and one on a third client
	require.Equal(t, "n1", recv(t, obs3, "n3's first observation").Leader.ID)
	sessions := []*election.Session{con.s1, s3}
	leases := []clientv3.LeaseID{con.s1.Lease(), s3.Lease()}

	cluster.OutliveTokens()

	res3 := campaignAsync(ctx, e3) // begun after the expiries
	waitCandidates(t, cli3, e3, 3)
	obs1 := con.e1.Observe(ctx) // begun after the expiries, on the leader's client
	require.Equal(t, "n1", recv(t, obs1, "n1's first observation").Leader.ID)
	require.NoError(t, con.t1.Resign(ctx))
	r2 := recv(t, con.res, "the blocked campaign to win")
	require.NoError(t, r2.err)
	assert.Greater(t, r2.term.Token().Epoch, con.t1.Token().Epoch)
	for _, obs := range []<-chan election.Observation{obs1, obs2, obs3} {
		for o := recv(t, obs, "an observation"); o.Leader.ID != "n2"; o = recv(t, obs, "an observation of n2") {
		}
	}

	cluster.OutliveTokens()

	select {
	case <-r2.term.Done():
		t.Fatalf("n2's term ended: %v", r2.term.Err())
	default:
	}
	require.NoError(t, r2.term.Resign(ctx))
	r3 := recv(t, res3, "the campaign begun after the expiries to win")
	require.NoError(t, r3.err)
	assert.Greater(t, r3.term.Token().Epoch, r2.term.Token().Epoch)
	for _, obs := range []<-chan election.Observation{obs1, obs2, obs3} {
		for o := recv(t, obs, "an observation"); o.Leader.ID != "n3"; o = recv(t, obs, "an observation of n3") {
		}
	}
	require.NoError(t, r3.term.Resign(ctx))

	for i, s := range sessions {
		assert.NoError(t, s.Err(), "session %d", i)
		assert.Equal(t, leases[i], s.Lease(), "session %d", i)
	}
	t.Logf("requests refused for an expired token: %d", c.Refusals())
	assert.LessOrEqual(t, c.Refusals(), c.MaxRefusals(3), "refusals for an expired token: a watch spins on one")
}

// TestAuthOtherTenant: a candidate whose etcd user's role covers another
// prefix only is refused at once, with an error that wraps etcd's
// permission denied, not retried until its context ends.
func TestAuthOtherTenant(t *testing.T) {
	c := newAuthCluster(t)
	ctx := testCtx(t)
	cli := c.NewClientAs(t, otherUser, otherPassword)
	e := newElection(t, newSession(t, cli, shortTTL), cli, "auth", "intruder")
	_, err := e.Campaign(ctx)
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
	require.NoError(t, ctx.Err(), "Campaign must not wait for its context to end")
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
}
