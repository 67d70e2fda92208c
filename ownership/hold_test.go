package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestHoldWhileAcquiring: while this node is the ring's owner of a
// partition but still acquiring it (its fencers have not returned), Hold's
// wrong-owner error says so, and names this node; once the fencers return,
// Hold admits work.
func TestHoldWhileAcquiring(t *testing.T) {
	const parts = 4
	entered := make(chan struct{}, parts)
	release := make(chan struct{})
	cfg := testConfig(t, "acquiring", "a", parts)
	cfg.Fencers = []fence.Fencer{fence.FencerFunc(func(ctx context.Context, _ fence.Token) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})}
	n := join(t, cluster.New(t, 1).NewClient(t), cfg)
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no fencer ran")
	}
	for p := range parts {
		_, err := n.HoldPartition(p)
		require.ErrorIs(t, err, ErrNotOwner)
		require.NotErrorIs(t, err, ErrReleasing)
		var wo *WrongOwnerError
		require.ErrorAs(t, err, &wo)
		assert.True(t, wo.Acquiring, "partition %d: %v", p, err)
		assert.Equal(t, "a", wo.Owner)
		assert.Equal(t, n.Ring().Version(), wo.RingVersion)
		assert.Contains(t, err.Error(), "acquiring here")
	}
	close(release)
	waitStable(t, 20*time.Second, n)
	for p := range parts {
		h, err := n.HoldPartition(p)
		require.NoError(t, err)
		h.Release()
	}
}
