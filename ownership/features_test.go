package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// olderBuild returns cfg as a build of an older feature level: it
// understands only features (none: the base protocol, as a build from
// before features were published). It lets one process run nodes of
// several feature levels; a separate binary of the previous level is
// built with the tag featurelevel_prev (router's
// TestRollingUpgradeBuilds).
func olderBuild(cfg Config, features ...string) Config {
	cfg.features = append([]string{}, features...)
	return cfg
}

// Mixed builds in one fleet: a member that publishes its build and
// features, and one of an older build that lacks placements. A pin, which
// needs placements, is refused naming the older member, and the spec
// does not record the feature while it is a member; once it leaves, the
// pin is taken and the spec records placements, and a node of the older
// build is then refused at Join, naming the feature, and leaves no member
// key behind.
func TestFeatureGateMixedBuilds(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 16, "features"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n1 := join(t, cli, testConfig(t, name, "n1", P))
	old := join(t, cli, olderBuild(testConfig(t, name, "n2", P), fleetview.FeatureWeightedRing))
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	ms, err := op.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, fleetview.Build(), ms[0].Build)
	assert.Equal(t, fleetview.Features(), ms[0].Features)
	assert.Equal(t, []string{fleetview.FeatureWeightedRing}, ms[1].Features)
	st, err := op.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{fleetview.FeatureWeightedRing}, st.Features, "the fleet's effective features")
	assert.Equal(t, []string{fleetview.FeatureWeightedRing}, st.Requires, "a new fleet of the weighted ring records it in use")

	who := fleet.Action{Actor: "test", Reason: "mixed builds"}
	_, err = op.Pin(ctx, 3, "n1", who)
	require.ErrorIs(t, err, ring.ErrFeatureUnsupported)
	require.ErrorIs(t, err, ring.ErrFeatureUnsupported)
	assert.Contains(t, err.Error(), `"placements"`)
	assert.Contains(t, err.Error(), "n2")
	st, err = op.Status(ctx)
	require.NoError(t, err)
	assert.NotContains(t, st.Requires, fleetview.FeaturePlacements, "not recorded while a member lacks it")

	closeNode(t, old)
	_, err = op.Pin(ctx, 3, "n1", who)
	require.NoError(t, err)
	st, err = op.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{fleetview.FeaturePlacements, fleetview.FeatureWeightedRing}, st.Requires)

	// (n1, alone, may have recorded the handover feature meanwhile: the
	// older builds below have it, so that each lacks the one feature named.)
	_, err = Join(ctx, cli, olderBuild(testConfig(t, name, "n3", P), fleetview.FeatureWeightedRing, fleetview.FeatureHandover))
	require.ErrorIs(t, err, ring.ErrFeatureUnsupported)
	assert.Contains(t, err.Error(), `"placements", which this build does not understand`)
	resp, err := cli.Get(ctx, keys.New(name).Member("n3"))
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "a refused node leaves no member key")

	// A build that lacks the weighted ring is refused by a fleet of it.
	_, err = Join(ctx, cli, olderBuild(testConfig(t, name, "n4", P), fleetview.FeaturePlacements, fleetview.FeatureHandover))
	require.ErrorIs(t, err, ring.ErrFeatureUnsupported)
	assert.Contains(t, err.Error(), `"weighted_ring", which this build does not understand`)
	waitStable(t, 30*time.Second, n1)
}
