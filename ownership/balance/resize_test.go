package balance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestBalancerPausesDuringResize: a pass planned before a resize of the
// partition count started is refused as stale; while the resize is in
// progress, passes are planned with Resizing naming it and refused as
// suspended, writing nothing; once it ends, passes apply again.
func TestBalancerPausesDuringResize(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-resize"
	skewedFleet(t, ctx, cli, name)
	b, err := NewBalancer(cli, Config{Cluster: name, Budget: 0.05})
	require.NoError(t, err)
	_, term := campaign(t, ctx, cli, name, "only")
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	before, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, before.Moves)
	// No node runs: the resize starts, and its driver waits for groups
	// that never move until its context ends.
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = op.Resize(dctx, 128, fleet.ResizeOptions{Actor: "t", Reason: "grow"})
	dcancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, b.Apply(ctx, term, before), ErrStaleSnapshot, "planned before the resize")

	during, err := b.Plan(ctx)
	require.NoError(t, err)
	require.Contains(t, during.Resizing, "of the partition count, 64 -> 128")
	require.Empty(t, during.Moves)
	require.ErrorIs(t, b.Apply(ctx, term, during), ErrSuspended)
	require.ErrorContains(t, b.Apply(ctx, term, during), "while a resize")
	require.Empty(t, placements(t, ctx, cli, name))

	rep, err := op.Resize(ctx, 0, fleet.ResizeOptions{Actor: "t", Reason: "back", Abort: true})
	require.NoError(t, err)
	require.True(t, rep.Completed)
	after, err := b.Plan(ctx)
	require.NoError(t, err)
	require.Empty(t, after.Resizing)
	require.NotEmpty(t, after.Moves)
	require.NoError(t, b.Apply(ctx, term, after))
	require.Len(t, placements(t, ctx, cli, name), len(after.Moves))
}
