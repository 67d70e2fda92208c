package fleet_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestVerifyAgainstClaims: Observer.Verify against a real fleet. A view
// that lags a new claim admits its owner's token after one read of the
// claim, and still refuses made-up epochs above it (unknown epoch) and
// older ones (stale). A following view decides without etcd; once the
// claim is gone, the last claim's epoch and older are stale and newer
// ones unknown. Scopes that are not the fleet's partitions are unknown
// scopes, a closed Observer refuses, and a read that fails is neither
// stale nor unverified (the Handler answers it as unavailable).
func TestVerifyAgainstClaims(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts = 4
	cfg := testConfig(t, "verify", "a", parts)
	frozen := fleet.FrozenObserver(t, cli, "verify", cfg.Ring)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := cfg.Ring
	rc.Algorithm = ring.AlgorithmWeighted // no node has joined: no spec says it yet
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "verify", Ring: rc})
	require.NoError(t, err)
	defer o.Close()

	a := join(t, cli, cfg)
	waitStable(t, 20*time.Second, a)
	e := a.LookupPartition(1).Epoch
	require.NotZero(t, e)
	scope := fence.PartitionScope(1)
	tok := func(epoch int64) fence.Token { return fence.Token{Scope: scope, Epoch: epoch} }
	waitObserver(t, o, func() error { return observerAgrees(o, a, parts) }, a)

	for name, v := range map[string]*fleet.Observer{"lagging": frozen, "following": o} {
		require.NoError(t, v.Verify(ctx, tok(e), fence.Signature{}), name)
		for _, forged := range []int64{e + 1, e + 1e9, math.MaxInt64} {
			require.ErrorIs(t, v.Verify(ctx, tok(forged), fence.Signature{}), fence.ErrUnknownEpoch, "%s %d", name, forged)
		}
		var se *fence.StaleError
		require.ErrorAs(t, v.Verify(ctx, tok(e-1), fence.Signature{}), &se, name)
		require.Equal(t, fence.StaleError{Scope: scope, Presented: e - 1, Current: e}, *se, name)
		for _, s := range []string{"leader/x", "p/4", "p/01", "p/-1", "p/", "q/1", "p/99999999999"} {
			require.ErrorIs(t, v.Verify(ctx, fence.Token{Scope: s, Epoch: e}, fence.Signature{}), fence.ErrUnknownScope, "%s %s", name, s)
		}
	}

	// The claim goes: nothing is admitted for partition 1.
	closeNode(t, a)
	waitObserver(t, o, func() error {
		if r := o.LookupPartition(1); r.Epoch != 0 {
			return errString("claim still seen")
		}
		return nil
	})
	for _, old := range []int64{e, e - 1} {
		var se *fence.StaleError
		require.ErrorAs(t, o.Verify(ctx, tok(old), fence.Signature{}), &se)
		require.Equal(t, e, se.Current)
	}
	require.ErrorIs(t, o.Verify(ctx, tok(e+1), fence.Signature{}), fence.ErrUnknownEpoch)

	// A read that cannot be made admits nothing and is no verdict.
	far := fleet.FrozenObserver(t, cli, "verify", cfg.Ring)
	fleet.SetReaderKV(far, cluster.UnreachableClient(t))
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	err = far.Verify(rctx, tok(e+1), fence.Signature{})
	require.Error(t, err)
	require.NotErrorIs(t, err, fence.ErrUnverified)
	require.NotErrorIs(t, err, fence.ErrStale)

	o.Close()
	require.ErrorIs(t, o.Verify(ctx, tok(e), fence.Signature{}), fleet.ErrClosed)
}

type errString string

func (e errString) Error() string { return string(e) }
