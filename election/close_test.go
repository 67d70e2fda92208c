package election_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestCloseElection: Close stops a campaign in progress and withdraws its
// candidacy, ends Run, and leaves Leader, Observe and Status working.
func TestCloseElection(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	cont := newContest(t, ctx, cli, cli, "billing")

	require.True(t, cont.e2.Status().Campaigning)
	require.NoError(t, cont.e2.Close(ctx))
	r := recv(t, cont.res, "the campaign to stop")
	require.ErrorIs(t, r.err, election.ErrElectionClosed)
	waitCandidates(t, cli, cont.e1, 1)
	st := cont.e2.Status()
	assert.True(t, st.Closed)
	assert.False(t, st.Campaigning)
	assert.False(t, st.Leader)
	l, err := cont.e2.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "n1", l.ID)
	assert.ErrorIs(t, cont.e2.Run(ctx, func(context.Context, fence.Token) error { return nil }), election.ErrElectionClosed)

	// Run on the leader's Election returns once it is closed.
	require.NoError(t, cont.t1.Resign(ctx))
	elected := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cont.e1.Run(ctx, func(ctx context.Context, _ fence.Token) error {
			close(elected)
			<-ctx.Done()
			return nil
		})
	}()
	recv(t, elected, "the leader to run")
	require.NoError(t, cont.e1.Close(ctx))
	require.ErrorIs(t, recv(t, done, "Run to return"), election.ErrElectionClosed)
	_, err = cont.e1.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "Close resigned the term")
}
