package balance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// skewedFleet writes a fleet's spec of 64 partitions, four members and
// load reports in which n00 carries ten times the load of the others on
// every partition.
func skewedFleet(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) *ring.Ring {
	t.Helper()
	return skewedFleetOf(t, ctx, cli, name, 64)
}

// skewedFleetOf is skewedFleet with parts partitions.
func skewedFleetOf(t *testing.T, ctx context.Context, cli *clientv3.Client, name string, parts int) *ring.Ring {
	t.Helper()
	l := keys.New(name)
	cfg := ring.Config{Partitions: parts, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	_, err := fleetview.EnsureSpec(ctx, cli, l, cfg, false)
	require.NoError(t, err)
	ids := []string{"n00", "n01", "n02", "n03"}
	for _, id := range ids {
		v, err := keys.EncodeMember(keys.Member{ID: id, Addr: id + ":1", Features: fleetview.Features()})
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Member(id), v)
		require.NoError(t, err)
	}
	r, err := ring.New(ids, cfg)
	require.NoError(t, err)
	for _, id := range ids {
		rep := keys.LoadReport{Window: 60}
		for _, p := range r.Owned(id) {
			rep.Partitions = append(rep.Partitions, p)
			rep.Loads = append(rep.Loads, map[bool]float64{true: 10, false: 1}[id == "n00"])
		}
		_, err := cli.Put(ctx, l.Load(id), keys.EncodeLoadReport(rep))
		require.NoError(t, err)
	}
	return r
}

// newCandidate returns a new candidate id ("": the election's default) of
// the fleet's balancer election, on a session of its own; both close when
// the test ends.
func newCandidate(t *testing.T, ctx context.Context, cli *clientv3.Client, name, id string) *election.Election {
	t.Helper()
	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "balancer", ID: id})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// campaign returns a won term of a new candidate of the fleet's balancer
// election.
func campaign(t *testing.T, ctx context.Context, cli *clientv3.Client, name, id string) (*election.Election, *election.Term) {
	t.Helper()
	e := newCandidate(t, ctx, cli, name, id)
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	return e, term
}

func placements(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) map[int]keys.Placement {
	t.Helper()
	resp, err := cli.Get(ctx, keys.New(name).Placements(), clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[int]keys.Placement{}
	for _, kv := range resp.Kvs {
		p, _ := keys.New(name).PlacementPartition(string(kv.Key))
		pl, err := keys.DecodePlacement(kv.Value)
		require.NoError(t, err)
		out[p] = pl
	}
	return out
}

// TestBalancerFencedByTerm: a pass planned from skewed load reports moves
// partitions off the hot member, written as the balancer's moves with the
// snapshot's revision, while its term stands; once deposed, etcd refuses
// its pass and nothing is written. Metrics count each result.
func TestBalancerFencedByTerm(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-term"
	skewedFleet(t, ctx, cli, name)
	reg := prometheus.NewRegistry()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	b, err := NewBalancer(cli, Config{Cluster: name, Metrics: reg, Clock: clk})
	require.NoError(t, err)

	_, term := campaign(t, ctx, cli, name, "first")
	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves)
	require.LessOrEqual(t, len(pl.Moves), 1, "1% of 64 partitions: at least 1")
	assert.Greater(t, pl.Before, 1.15)
	require.NoError(t, b.Apply(ctx, term, pl))
	got := placements(t, ctx, cli, name)
	require.Len(t, got, 1)
	m := pl.Moves[0]
	assert.Equal(t, keys.Placement{Node: m.To, Origin: keys.OriginBalance, Rev: pl.Rev, Time: clk.Now().UnixMilli()}, got[m.Partition])
	assert.Equal(t, "n00", m.From)
	assert.InDelta(t, pl.Before, testutil.ToFloat64(b.metrics.imbalanceG), 1e-9)

	// Deposed: the term is resigned and another balancer wins; the old
	// one's next pass is refused by etcd.
	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves)
	require.NoError(t, term.Resign(ctx))
	_, next := campaign(t, ctx, cli, name, "second")
	assert.Greater(t, next.Token().Epoch, term.Token().Epoch)
	err = b.Apply(ctx, term, pl)
	require.ErrorIs(t, err, ErrDeposed)
	assert.Len(t, placements(t, ctx, cli, name), 1, "the deposed balancer wrote nothing")
	require.NoError(t, b.Apply(ctx, next, pl), "the new term's pass lands")
	assert.Len(t, placements(t, ctx, cli, name), 2)

	assert.Equal(t, 2.0, testutil.ToFloat64(b.metrics.movesC.WithLabelValues("balance")))
	assert.Equal(t, 1.0, testutil.ToFloat64(b.metrics.passesC.WithLabelValues("deposed")))
	assert.Equal(t, 2.0, testutil.ToFloat64(b.metrics.passesC.WithLabelValues("applied")))
}

// TestBalancerStaleSnapshot: a pass is refused when a member joined since
// its snapshot, or when a pin was written on one of its partitions; a
// pass planned again lands, and never moves a pinned partition.
func TestBalancerStaleSnapshot(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-stale"
	skewedFleet(t, ctx, cli, name)
	b, err := NewBalancer(cli, Config{Cluster: name, Budget: 0.05})
	require.NoError(t, err)
	_, term := campaign(t, ctx, cli, name, "only")
	l := keys.New(name)

	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves)
	v, err := keys.EncodeMember(keys.Member{ID: "n04", Features: fleetview.Features()})
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Member("n04"), v)
	require.NoError(t, err)
	require.ErrorIs(t, b.Apply(ctx, term, pl), ErrStaleSnapshot, "a member joined")
	assert.Empty(t, placements(t, ctx, cli, name))

	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves)
	pinned := pl.Moves[0].Partition
	_, err = cli.Put(ctx, l.Placement(pinned), keys.EncodePlacement(keys.Placement{Node: "n00", Origin: keys.OriginPin, By: "op", Reason: "test"}))
	require.NoError(t, err)
	require.ErrorIs(t, b.Apply(ctx, term, pl), ErrStaleSnapshot, "a pin on a moved partition")
	assert.Equal(t, keys.OriginPin, placements(t, ctx, cli, name)[pinned].Origin, "the pin stands")

	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	for _, m := range pl.Moves {
		assert.NotEqual(t, pinned, m.Partition, "a pinned partition is never moved")
	}
	require.NoError(t, b.Apply(ctx, term, pl))
	got := placements(t, ctx, cli, name)
	assert.Len(t, got, len(pl.Moves)+1, fmt.Sprint(got))
}

// TestBalancerPassFitsOneTxn: a pass whose budget exceeds what one etcd
// transaction can carry (etcd refuses more than 128 comparisons or
// operations by default) is cut to fit, and applies; the rest is left to
// the next passes.
func TestBalancerPassFitsOneTxn(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-txn"
	skewedFleetOf(t, ctx, cli, name, 8192)
	b, err := NewBalancer(cli, Config{Cluster: name, Budget: 0.05})
	require.NoError(t, err)
	_, term := campaign(t, ctx, cli, name, "only")

	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves)
	require.NoError(t, b.Apply(ctx, term, pl), "a pass of %d moves", len(pl.Moves))
	assert.Less(t, len(pl.Moves), Budget(8192, 0.05), "the pass is cut below its budget")
	assert.Len(t, placements(t, ctx, cli, name), len(pl.Moves))
}
