package ownership

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestNodeObserverOperatorAgreeOnPlacements: with capacity weights, an
// operator's pin and a balancer's move in etcd, the Nodes, an Observer and
// the Operator (tenurectl's reader) name the same owner of every
// partition, one pure function of what etcd holds; a pinned partition
// moves at a new epoch; a pin on a drained node falls back to the ring.
func TestNodeObserverOperatorAgreeOnPlacements(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts, name = 16, "placed"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfgOf := func(id string, weight int) Config {
		cfg := testConfig(t, name, id, parts)
		cfg.Ring.Algorithm = ring.AlgorithmWeighted
		cfg.Weight = weight
		return cfg
	}
	a := join(t, cli, cfgOf("a", 1))
	b := join(t, cli, cfgOf("b", 2))
	cn := join(t, cli, cfgOf("c", 1))
	nodes := []*Node{a, b, cn}
	waitStable(t, 20*time.Second, nodes...)
	r := a.Ring()
	assert.Equal(t, 2, r.Weight("b"))
	assert.Equal(t, ring.AlgorithmWeighted, r.Algorithm())

	// Pick three partitions whose ring owners are not the nodes they are
	// placed on.
	pick := func(not string, skip ...int) int {
		for p := range parts {
			if o, _ := r.Owner(p); o != not && !slices.Contains(skip, p) {
				return p
			}
		}
		t.Fatalf("no partition outside %s", not)
		return -1
	}
	pinned := pick("b")
	moved := pick("a", pinned)
	toDrain := pick("c", pinned, moved)
	before := a.LookupPartition(pinned).Epoch

	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	who := fleet.Action{Actor: "test", Reason: "placement test"}
	_, err = op.Pin(ctx, pinned, "b", fleet.Action{Actor: "test"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	_, err = op.Pin(ctx, pinned, "nobody", who)
	require.ErrorIs(t, err, fleet.ErrNotFound)
	_, err = op.Pin(ctx, parts, "b", who)
	require.ErrorIs(t, err, fleet.ErrInvalidPartition)
	rec, err := op.Pin(ctx, pinned, "b", who)
	require.NoError(t, err)
	_, err = op.Pin(ctx, toDrain, "c", who)
	require.NoError(t, err)
	_, err = cli.Put(ctx, keys.New(name).Placement(moved), keys.EncodePlacement(keys.Placement{Node: "a", Origin: keys.OriginBalance, Rev: rec.Revision}))
	require.NoError(t, err)
	_, err = op.Unpin(ctx, moved, who)
	require.ErrorIs(t, err, fleet.ErrNotFound, "a balancer's move is no pin")

	placedOn := map[int]string{pinned: "b", moved: "a", toDrain: "c"}
	// Each wait checks the change it waits for before stableErr: a fleet
	// that has not seen the change yet is stable too, and a node's ring
	// read after stableErr may be newer than the one stableErr judged.
	require.NoError(t, waitFor(20*time.Second, func() error {
		for p, want := range placedOn {
			if got, _ := a.Ring().Owner(p); got != want {
				return fmt.Errorf("partition %d owned by %s, placed on %s", p, got, want)
			}
		}
		return stableErr(nodes)
	}, nodes...))
	assert.Greater(t, b.LookupPartition(pinned).Epoch, before, "the pinned partition moved at a new epoch")
	assert.True(t, placed(a.Ring(), pinned))

	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: cfgOf("x", 1).Ring})
	require.NoError(t, err)
	defer o.Close()
	agree := func(nodes ...*Node) {
		t.Helper()
		waitObserver(t, o, func() error {
			for _, n := range nodes {
				if err := observerAgrees(o, n, parts); err != nil {
					return fmt.Errorf("%s: %w", n.ID(), err)
				}
			}
			return nil
		}, nodes...)
		ps, err := op.Partitions(ctx)
		require.NoError(t, err)
		for p, s := range ps {
			want := nodes[0].LookupPartition(p)
			assert.Equal(t, want.Owner, s.Next, "partition %d: operator and node", p)
			assert.Equal(t, want.Owner, s.Owner, "partition %d", p)
			assert.Equal(t, want.Epoch, s.Epoch, "partition %d", p)
		}
	}
	agree(nodes...)
	ps, err := op.Partitions(ctx)
	require.NoError(t, err)
	assert.Equal(t, "pin", ps[pinned].Placed)
	assert.Equal(t, "balance", ps[moved].Placed)

	// Drain c: its pin falls back to the ring, for every reader alike.
	_, err = op.Drain(ctx, "c", who)
	require.NoError(t, err)
	rest := []*Node{a, b}
	require.NoError(t, waitFor(20*time.Second, func() error {
		if got, _ := a.Ring().RingOwner(toDrain); a.LookupPartition(toDrain).Owner != got {
			return fmt.Errorf("partition %d not back on the ring's %s", toDrain, got)
		}
		return stableErr(rest)
	}, nodes...))
	assert.False(t, placed(a.Ring(), toDrain))
	agree(rest...)

	// Unpinned, the partition goes back to the ring's owner, at a new
	// epoch.
	pinnedAt := b.LookupPartition(pinned).Epoch
	_, err = op.Unpin(ctx, pinned, who)
	require.NoError(t, err)
	require.NoError(t, waitFor(20*time.Second, func() error {
		if placed(a.Ring(), pinned) {
			return fmt.Errorf("partition %d still placed", pinned)
		}
		if r := a.LookupPartition(pinned); r.Epoch <= pinnedAt {
			return fmt.Errorf("partition %d not claimed again since the unpin: %+v", pinned, r)
		}
		return stableErr(rest)
	}, nodes...))
	agree(rest...)
	audit, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	var actions []string
	for _, r := range audit {
		actions = append(actions, r.Action)
	}
	assert.Equal(t, []string{"pin", "pin", "drain", "unpin"}, actions)
}
