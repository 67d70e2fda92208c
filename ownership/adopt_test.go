package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestJoinAdoptsSpec: with AdoptSpec, the first node of a fleet stores its
// Ring as the spec and later nodes use the stored one whatever their Ring
// says; a node without AdoptSpec is still refused a different Ring, and a
// stored spec this build cannot compute is refused either way.
func TestJoinAdoptsSpec(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cfg := testConfig(t, "adopt", "a", 16)
	cfg.AdoptSpec = true
	a := join(t, cli, cfg)
	assert.Equal(t, 16, a.Ring().Partitions(), "the first node's Ring is the spec")
	spec, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("adopt"))
	require.NoError(t, err)
	assert.Equal(t, ring.Spec{Partitions: 16, LoadFactor: 1.25, RingAlgorithm: ring.AlgorithmWeighted}, spec)

	cfg = testConfig(t, "adopt", "b", 1024)
	cfg.Ring.LoadFactor = 1.5
	cfg.AdoptSpec = true
	b := join(t, c.NewClient(t), cfg)
	assert.Equal(t, 16, b.Ring().Partitions(), "b adopted the fleet's partition count")
	assert.Equal(t, 1.25, b.Ring().LoadFactor(), "b adopted the fleet's load factor")
	waitStable(t, 20*time.Second, a, b)
	again, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix("adopt"))
	require.NoError(t, err)
	assert.Equal(t, spec, again, "adopting changes nothing in etcd")

	n, err := Join(ctx, c.NewClient(t), testConfig(t, "adopt", "c", 1024))
	require.Nil(t, n)
	require.ErrorIs(t, err, ring.ErrSpecMismatch, "without AdoptSpec a different Ring is refused")

	_, err = cli.Put(ctx, keys.New("adopt-bad").Spec(), `{"partitions":16,"load_factor":1.25,"ring_algorithm":99}`)
	require.NoError(t, err)
	cfg = testConfig(t, "adopt-bad", "a", 16)
	cfg.AdoptSpec = true
	n, err = Join(ctx, cli, cfg)
	require.Nil(t, n)
	require.ErrorIs(t, err, ring.ErrInvalidSpec)
}

// TestJoinAdoptsSpecConcurrently: nodes that join an empty fleet at once
// never end up with two partition counts. Two nodes, one adopting (its
// Ring says 1024) and one not (16), race in many fleets: the adopter
// always joins with the spec stored in etcd; the other joins if that spec
// is its own and is refused with a *SpecMismatchError naming it if not.
// Two adopters with different Rings both join, with the same spec.
func TestJoinAdoptsSpecConcurrently(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type result struct {
		n   *Node
		err error
	}
	race := func(t *testing.T, cfgs ...Config) []result {
		out := make([]result, len(cfgs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, cfg := range cfgs {
			wg.Go(func() {
				<-start
				n, err := Join(ctx, c.NewClient(t), cfg)
				if n != nil {
					t.Cleanup(func() { closeNode(t, n) })
				}
				out[i] = result{n, err}
			})
		}
		close(start)
		wg.Wait()
		return out
	}

	// A lease grant slowed by a loaded machine past the short TTL of the
	// other tests refuses the session; this test races spec adoption, not
	// leases.
	config := func(name, id string, partitions int) Config {
		cfg := testConfig(t, name, id, partitions)
		cfg.Session.TTL = 10 * time.Second
		return cfg
	}

	won := map[int]int{} // stored partition count -> rounds
	for round := range 8 {
		name := fmt.Sprintf("race-%d", round)
		adopter := config(name, "adopter", 1024)
		adopter.AdoptSpec = true
		fixed := config(name, "fixed", 16)
		rs := race(t, adopter, fixed)
		spec, err := fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix(name))
		require.NoError(t, err)
		won[spec.Partitions]++

		require.NoError(t, rs[0].err, "the adopter always joins")
		assert.Equal(t, spec.Partitions, rs[0].n.Ring().Partitions(), "the adopter uses the stored spec")
		if spec.Partitions == 16 {
			require.NoError(t, rs[1].err)
			waitStable(t, 20*time.Second, rs[0].n, rs[1].n)
			continue
		}
		var mm *ring.SpecMismatchError
		require.ErrorAs(t, rs[1].err, &mm)
		assert.Equal(t, spec, mm.Fleet)
		assert.Nil(t, rs[1].n)
	}
	t.Logf("stored partition counts over the rounds: %v", won)

	a := config("race-adopters", "a", 16)
	a.AdoptSpec = true
	b := config("race-adopters", "b", 32)
	b.AdoptSpec = true
	rs := race(t, a, b)
	require.NoError(t, errors.Join(rs[0].err, rs[1].err))
	assert.Equal(t, rs[0].n.Ring().Partitions(), rs[1].n.Ring().Partitions())
	waitStable(t, 20*time.Second, rs[0].n, rs[1].n)
}
