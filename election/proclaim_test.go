package election_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestProclaim(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	e := newElection(t, s, cli, "billing", "n1")

	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	obs := e.Observe(obsCtx)
	o := recv(t, obs, "the initial state")
	require.True(t, o.Elected)
	require.Equal(t, "addr-n1", o.Leader.Value)

	require.NoError(t, term.Proclaim(ctx, "addr-n1;progress=42"))
	assert.Equal(t, "addr-n1;progress=42", e.Status().Observed.Leader.Value, "Status sees its own proclaim")
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, election.Leader{ID: "n1", Value: "addr-n1;progress=42", Epoch: term.Token().Epoch, Lease: s.Lease(), Key: term.Key()}, l,
		"the value changes; the ID, epoch and lease stay")
	o = recv(t, obs, "the proclaimed value")
	assert.Equal(t, l, o.Leader)
	require.NoError(t, term.Err(), "proclaiming does not end the term")
	assert.Equal(t, l, e.Status().Observed.Leader)

	require.NoError(t, term.Resign(ctx))
	err = term.Proclaim(ctx, "late")
	require.ErrorIs(t, err, election.ErrNotLeader)
	require.ErrorIs(t, err, election.ErrResigned)
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "a resigned term's proclaim writes nothing")
}

// blindWatcher is a clientv3.Watcher whose watches never report anything:
// a term watched through it does not learn that its key was deleted.
type blindWatcher struct{}

func (blindWatcher) Watch(ctx context.Context, _ string, _ ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

func (blindWatcher) RequestProgress(context.Context) error { return nil }
func (blindWatcher) Close() error                          { return nil }

// TestProclaimStaleLeader: a leader whose key was deleted and that has not
// noticed yet proclaims after its successor was elected; etcd refuses the
// put, the successor's value stands, and the stale term ends.
func TestProclaimStaleLeader(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	s1 := newSession(t, cli, shortTTL)
	e1, err := election.NewElection(s1, cli, blindWatcher{}, election.ElectionConfig{Cluster: testCluster, Name: "billing", ID: "n1", Value: "addr-n1"})
	require.NoError(t, err)
	e2 := newElection(t, newSession(t, cli, shortTTL), cli, "billing", "n2")

	t1, err := e1.Campaign(ctx)
	require.NoError(t, err)
	_, err = cli.Delete(ctx, t1.Key()) // an operator's force release
	require.NoError(t, err)
	t2, err := e2.Campaign(ctx)
	require.NoError(t, err)
	require.Greater(t, t2.Token().Epoch, t1.Token().Epoch)
	require.NoError(t, t1.Err(), "the stale leader has not noticed")
	require.True(t, e1.Status().Leader, "nor has its Status")

	err = t1.Proclaim(ctx, "stale")
	require.ErrorIs(t, err, election.ErrKeyDeleted)
	require.ErrorIs(t, err, election.ErrNotLeader)
	l, err := e2.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, election.Leader{ID: "n2", Value: "addr-n2", Epoch: t2.Token().Epoch, Lease: keyLease(t, cli, t2), Key: t2.Key()}, l,
		"the successor's value stands")
	resp, err := cli.Get(ctx, t1.Key())
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "the stale leader's key was not recreated")
	recv(t, t1.Done(), "the stale term to end")
	require.ErrorIs(t, t1.Err(), election.ErrKeyDeleted)
	assert.False(t, e1.Status().Leader)
	require.NoError(t, t2.Proclaim(ctx, "addr-n2;v2"))
}

// keyLease returns the lease of term's key in etcd.
func keyLease(t *testing.T, cli *clientv3.Client, term *election.Term) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(testCtx(t), term.Key())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}
