package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestSpecMismatchRefused: the first node writes the fleet's spec; a node
// whose partition count or load factor differs is refused at Join with a
// typed error naming both values, and leaves no member key behind, so no
// key can be accepted under two partition counts.
func TestSpecMismatchRefused(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	a := join(t, cli, testConfig(t, "spec", "a", 16))
	waitStable(t, 20*time.Second, a)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spec, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("spec"))
	require.NoError(t, err)
	assert.Equal(t, ring.Spec{Partitions: 16, LoadFactor: 1.25, RingAlgorithm: ring.AlgorithmWeighted}, spec)

	tests := []struct {
		name  string
		edit  func(*Config)
		field string
		msg   []string
	}{
		{"partitions", func(c *Config) { c.Ring.Partitions = 32 }, "partitions", []string{"partitions 32 here, 16 in the fleet"}},
		{"load factor", func(c *Config) { c.Ring.LoadFactor = 1.5 }, "load factor", []string{"load factor 1.5 here, 1.25 in the fleet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "spec", "b", 16)
			tt.edit(&cfg)
			n, err := Join(ctx, c.NewClient(t), cfg)
			require.Nil(t, n)
			require.ErrorIs(t, err, ring.ErrSpecMismatch)
			var mm *ring.SpecMismatchError
			require.ErrorAs(t, err, &mm)
			assert.Equal(t, tt.field, mm.Field)
			assert.Equal(t, spec, mm.Fleet)
			for _, s := range tt.msg {
				assert.Contains(t, err.Error(), s)
			}
			assert.Equal(t, []string{"a"}, etcdMembers(t, cli, "spec"), "the refused node registered nothing")
		})
	}
	// The same configuration joins.
	b := join(t, c.NewClient(t), testConfig(t, "spec", "b", 16))
	waitStable(t, 20*time.Second, a, b)
}

// TestSpecInvalid: a stored spec this build cannot use refuses Join and
// ReadSpec with ErrInvalidSpec; a fleet without a spec reads as ErrNoSpec.
func TestSpecInvalid(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("nospec"))
	require.ErrorIs(t, err, fleet.ErrNoSpec)

	for _, v := range []string{"{", `{"partitions":0,"load_factor":1.25,"ring_algorithm":1}`, `{"partitions":16,"load_factor":1.25,"ring_algorithm":99}`} {
		_, err := cli.Put(ctx, keys.New("badspec").Spec(), v)
		require.NoError(t, err)
		_, err = fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("badspec"))
		require.ErrorIs(t, err, ring.ErrInvalidSpec, v)
		_, err = Join(ctx, cli, testConfig(t, "badspec", "a", 16))
		require.ErrorIs(t, err, ring.ErrInvalidSpec, v)
	}
}

// TestJoinUnreachableEtcd: Join with etcd down and a 2s context returns
// when the context ends, with an error that wraps ErrUnavailable and the
// context's error and names the cause, after logging a warning with the
// cause while it waited.
func TestJoinUnreachableEtcd(t *testing.T) {
	cli := cluster.UnreachableClient(t)
	var logs testsupport.Buffer
	cfg := testConfig(t, "down", "a", 16)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	n, err := Join(ctx, cli, cfg)
	took := time.Since(start)
	t.Logf("Join returned after %v: %v", took.Round(time.Millisecond), err)
	require.Nil(t, n)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "connection refused")
	assert.Contains(t, logs.String(), "etcd does not answer")
	assert.Contains(t, logs.String(), "connection refused")
	assert.Contains(t, logs.String(), "node=a")
}

// TestSpecAlgorithmOfARunningFleet: a fleet whose spec an older build
// stored with the count-only algorithm (ring_algorithm 1) keeps it: a node
// and an Observer that leave the algorithm unset adopt it and agree on
// every owner; a node that asserts the weighted algorithm is refused with
// a *ring.SpecMismatchError naming both; a node of weight 2 is refused with
// ErrWeightUnsupported, saying how to get a weighted fleet, before it
// registers. A new fleet records the weighted algorithm.
func TestSpecAlgorithmOfARunningFleet(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, keys.New("old").Spec(), `{"partitions":16,"load_factor":1.25,"ring_algorithm":1}`)
	require.NoError(t, err)

	a := join(t, cli, testConfig(t, "old", "a", 16))
	assert.Equal(t, ring.AlgorithmBounded, a.Ring().Algorithm(), "the fleet's algorithm, adopted")
	b := join(t, c.NewClient(t), testConfig(t, "old", "b", 16))
	waitStable(t, 20*time.Second, a, b)
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "old", Ring: ring.Config{Partitions: 16, LoadFactor: 1.25}})
	require.NoError(t, err)
	defer o.Close()
	for p := range 16 {
		assert.Equal(t, a.LookupPartition(p).Owner, o.LookupPartition(p).Owner, "partition %d", p)
	}

	weighted := testConfig(t, "old", "w", 16)
	weighted.Ring.Algorithm = ring.AlgorithmWeighted
	n, err := Join(ctx, cli, weighted)
	require.Nil(t, n)
	require.ErrorIs(t, err, ring.ErrSpecMismatch)
	assert.Contains(t, err.Error(), "ring algorithm weighted here, bounded in the fleet")
	_, err = fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: "old", Ring: weighted.Ring})
	require.ErrorIs(t, err, ring.ErrSpecMismatch, "an Observer is refused alike")

	heavy := testConfig(t, "old", "heavy", 16)
	heavy.Weight = 2
	n, err = Join(ctx, cli, heavy)
	require.Nil(t, n)
	require.ErrorIs(t, err, ErrWeightUnsupported)
	assert.Contains(t, err.Error(), "weight 2")
	assert.Contains(t, err.Error(), "start a new fleet")
	assert.Equal(t, []string{"a", "b"}, etcdMembers(t, cli, "old"), "the refused nodes registered nothing")
	heavy.Ring.Algorithm = ring.AlgorithmBounded
	require.ErrorIs(t, heavy.Validate(), ErrWeightUnsupported, "refused before Join reads etcd")
	require.ErrorIs(t, heavy.Validate(), ErrInvalidConfig)
	heavy.Weight = 1
	require.NoError(t, heavy.Validate(), "weight 1 is every node's weight there")

	fresh := testConfig(t, "new", "a", 16)
	fresh.Weight = 2
	n = join(t, cli, fresh)
	assert.Equal(t, ring.AlgorithmWeighted, n.Ring().Algorithm())
	spec, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("new"))
	require.NoError(t, err)
	assert.Equal(t, ring.AlgorithmWeighted, spec.RingAlgorithm)
}
