package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestSessionRenewsAndCloses(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)

	before := time.Now()
	s := newSession(t, cli, 3*time.Second) // renews every 700ms
	require.NoError(t, s.Err())
	assert.Equal(t, 3*time.Second, s.TTL())
	first := s.Status().SafeDeadline
	// The grant counts from before it was sent: TTL - margin (500ms) after a
	// time no earlier than before.
	assert.False(t, first.Before(before.Add(2500*time.Millisecond)))
	assert.False(t, first.After(time.Now().Add(2500*time.Millisecond)))

	require.Eventually(t, func() bool { return s.Status().Renewals >= 2 }, wait, 10*time.Millisecond)
	st := s.Status()
	assert.True(t, st.SafeDeadline.After(first), "an acknowledged renewal moves the safe deadline")
	assert.Positive(t, st.Remaining)
	assert.Positive(t, st.LastRenewLatency)
	select {
	case <-s.Done():
		t.Fatal("session ended while etcd was reachable")
	default:
	}

	ttl, err := cli.TimeToLive(ctx, s.Lease())
	require.NoError(t, err)
	assert.Positive(t, ttl.TTL)

	require.NoError(t, s.Close(ctx))
	require.NoError(t, s.Close(ctx), "Close is idempotent")
	<-s.Done()
	assert.ErrorIs(t, s.Err(), election.ErrSessionClosed)
	assert.ErrorIs(t, s.Err(), election.ErrSessionDone)
	assert.ErrorIs(t, context.Cause(s.Context()), election.ErrSessionClosed)
	ttl, err = cli.TimeToLive(ctx, s.Lease())
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL, "Close revokes the lease")
}

func TestSessionTTLRoundsUpToSeconds(t *testing.T) {
	c := cluster.New(t, 1)
	s := newSession(t, c.NewClient(t), 2500*time.Millisecond)
	assert.Equal(t, 3*time.Second, s.TTL())
}

func TestSessionLeaseRevoked(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	s := newSession(t, cli, shortTTL)
	_, err := admin.Revoke(testCtx(t), s.Lease())
	require.NoError(t, err)
	recv(t, s.Done(), "the session to notice the revoke")
	assert.ErrorIs(t, s.Err(), election.ErrLeaseLost)
	assert.ErrorIs(t, s.Err(), election.ErrSessionDone)
	require.NoError(t, s.Close(testCtx(t)), "closing a lost session is not an error")
}

// TestSessionExpiresBeforeEtcd cuts the session off from etcd: it ends with
// ErrSessionExpired before its safe deadline, while etcd still holds the
// lease.
func TestSessionExpiresBeforeEtcd(t *testing.T) {
	c := cluster.New(t, 1)
	cli, fp := c.NewFaultyClient(t)
	admin := c.NewClient(t)
	s := newSession(t, cli, shortTTL)
	require.Eventually(t, func() bool { return s.Status().Renewals >= 1 }, wait, 5*time.Millisecond)

	fp.Blackhole()
	ended := recv(t, doneAt(s.Done()), "the session to expire")
	assert.ErrorIs(t, s.Err(), election.ErrSessionExpired)
	deadline := s.Status().SafeDeadline
	assert.False(t, ended.After(deadline), "ended %v after its safe deadline", ended.Sub(deadline))

	ttl, err := admin.TimeToLive(testCtx(t), s.Lease())
	require.NoError(t, err)
	// TTL is etcd's remaining time in whole seconds, -1 once the lease is gone.
	assert.GreaterOrEqual(t, ttl.TTL, int64(0), "etcd must still hold the lease when the session gives it up")
	assert.Positive(t, s.Status().Failures)

	// Once healed, the expired session stays ended; Close revokes the lease.
	fp.Heal()
	require.NoError(t, s.Close(testCtx(t)))
	assert.ErrorIs(t, s.Err(), election.ErrSessionExpired, "Close keeps the first reason")
	require.Eventually(t, func() bool {
		ttl, err := admin.TimeToLive(context.Background(), s.Lease())
		return err == nil && ttl.TTL == -1
	}, wait, 10*time.Millisecond)
}

func TestSessionGrantFailure(t *testing.T) {
	c := cluster.New(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := election.NewSession(ctx, c.NewClient(t), election.SessionConfig{TTL: shortTTL})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, s)
}

var _ clientv3.Lease = (*clientv3.Client)(nil)
