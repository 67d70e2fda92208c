package balance

import (
	"context"
	"fmt"
	"sync"
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
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestBalancerSuspended: while an operator's suspension stands, a pass is
// planned and reported (imbalance, member loads, the suspended gauge) but
// writes nothing; a suspension written after a pass was planned makes
// etcd refuse the pass; once resumed, a pass lands with its record, which
// the operator reads.
func TestBalancerSuspended(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-suspend"
	skewedFleet(t, ctx, cli, name)
	reg := prometheus.NewRegistry()
	b, err := NewBalancer(cli, Config{Cluster: name, Metrics: reg})
	require.NoError(t, err)
	_, term := campaign(t, ctx, cli, name, "only")
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	_, err = op.SuspendBalancer(ctx, fleet.Action{Actor: "alice", Reason: "incident"})
	require.NoError(t, err)
	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotNil(t, pl.Suspended)
	assert.Equal(t, "incident", pl.Suspended.Reason)
	assert.NotEmpty(t, pl.Moves, "a suspended balancer still plans")
	assert.Equal(t, 1.0, testutil.ToFloat64(b.metrics.suspendedG))
	assert.InDelta(t, pl.Before, testutil.ToFloat64(b.metrics.imbalanceG), 1e-9)
	require.ErrorIs(t, b.Apply(ctx, term, pl), ErrSuspended)
	assert.Empty(t, placements(t, ctx, cli, name))

	_, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "alice", Reason: "over"})
	require.NoError(t, err)
	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	require.Nil(t, pl.Suspended)
	assert.Equal(t, 0.0, testutil.ToFloat64(b.metrics.suspendedG))
	_, err = op.SuspendBalancer(ctx, fleet.Action{Actor: "bob", Reason: "again"})
	require.NoError(t, err)
	require.ErrorIs(t, b.Apply(ctx, term, pl), ErrSuspended, "suspended after the snapshot: refused by etcd")
	assert.Empty(t, placements(t, ctx, cli, name))
	assert.Equal(t, 2.0, testutil.ToFloat64(b.metrics.passesC.WithLabelValues("suspended")))

	_, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "bob", Reason: "over"})
	require.NoError(t, err)
	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Apply(ctx, term, pl))
	rep, err := op.Placement(ctx)
	require.NoError(t, err)
	st := rep.Balancer
	require.NotNil(t, st.LastPass)
	assert.Equal(t, pl.Rev, st.LastPass.Snapshot)
	assert.Equal(t, term.Token().Epoch, st.LastPass.Term)
	require.Len(t, st.LastPass.Moves, len(pl.Moves))
	assert.Equal(t, fleet.BalancerMove(pl.Moves[0]), st.LastPass.Moves[0])
	assert.Equal(t, DefaultConfig().Cooldown, time.Duration(st.LastPass.Cooldown))
	assert.Equal(t, DefaultConfig().Upper, st.LastPass.Upper)
	assert.InDelta(t, pl.Before, st.LastPass.Before, 1e-9)

	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 4)
	for i, a := range []string{"balance-suspend", "balance-resume", "balance-suspend", "balance-resume"} {
		assert.Equal(t, a, recs[i].Action)
	}
}

// TestBalancerCooldownFromEtcd: the cooldown of a partition a balancer
// moved is read from the time its move records, so a new balancer (after a
// failover, or a dry run) leaves the partition where it is until the
// cooldown has passed, though it is the best move.
func TestBalancerCooldownFromEtcd(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "balance-cooldown"
	l := keys.New(name)
	cfg := ring.Config{Partitions: 16, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	_, err := fleetview.EnsureSpec(ctx, cli, l, cfg, false)
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		v, err := keys.EncodeMember(keys.Member{ID: id, Addr: id + ":1", Features: fleetview.Features()})
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Member(id), v)
		require.NoError(t, err)
	}
	r, err := ring.New([]string{"a", "b"}, cfg)
	require.NoError(t, err)
	report := func(id string, loads map[int]float64) {
		t.Helper()
		rep := keys.LoadReport{Window: 60}
		for p, v := range loads {
			rep.Partitions = append(rep.Partitions, p)
			rep.Loads = append(rep.Loads, v)
		}
		_, err := cli.Put(ctx, l.Load(id), keys.EncodeLoadReport(rep))
		require.NoError(t, err)
	}
	each := func(ps []int, v float64) map[int]float64 {
		m := map[int]float64{}
		for _, p := range ps {
			m[p] = v
		}
		return m
	}
	report("a", each(r.Owned("a"), 10))
	report("b", each(r.Owned("b"), 1))

	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	first, err := NewBalancer(cli, Config{Cluster: name, Clock: clk})
	require.NoError(t, err)
	_, term := campaign(t, ctx, cli, name, "first")
	pl, err := first.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, pl.Moves, 1)
	p := pl.Moves[0].Partition
	require.Equal(t, "b", pl.Moves[0].To)
	require.NoError(t, first.Apply(ctx, term, pl))

	// b is now the hot one, and p the partition whose move evens it out
	// best: 40 of b's 80, where the ideal is 36.5.
	var others []int
	for _, q := range r.Owned("b") {
		if len(others) < 4 {
			others = append(others, q)
		}
	}
	hot := each(others, 10)
	hot[p] = 40
	report("b", hot)
	report("a", each(r.Owned("a"), 1))

	second, err := NewBalancer(cli, Config{Cluster: name, Clock: clk})
	require.NoError(t, err)
	clk.Advance(30 * time.Second)
	pl, err = second.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, pl.Moves, 1)
	assert.NotEqual(t, p, pl.Moves[0].Partition, "partition %d moved %v ago, within the cooldown", p, 30*time.Second)
	assert.Equal(t, "b", pl.Moves[0].From)
	clk.Advance(31 * time.Second)
	pl, err = second.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, pl.Moves, 1)
	assert.Equal(t, p, pl.Moves[0].Partition, "past the cooldown: %s", fmt.Sprint(pl.Moves))
}

// TestSuspensionSurvivesFailover: the suspension is in etcd, so whichever
// balancer leads obeys it: two balancers run, the leader plans while
// suspended and writes nothing; its session ends, the other is elected
// and plans while suspended, writing nothing either; resumed, it moves.
func TestSuspensionSurvivesFailover(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const name = "balance-failover"
	skewedFleet(t, ctx, cli, name)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	_, err = op.SuspendBalancer(ctx, fleet.Action{Actor: "alice", Reason: "freeze"})
	require.NoError(t, err)

	type runner struct {
		b    *Balancer
		sess *election.Session
		stop func()
	}
	start := func(id string) *runner {
		sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
		require.NoError(t, err)
		e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "balancer", ID: id})
		require.NoError(t, err)
		b, err := NewBalancer(cli, Config{Cluster: name, Interval: 20 * time.Millisecond, Metrics: prometheus.NewRegistry()})
		require.NoError(t, err)
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = b.Run(rctx, e) })
		r := &runner{b: b, sess: sess, stop: func() {
			stop()
			wg.Wait()
			_ = e.Close(context.Background())
			_ = sess.Close(context.Background())
		}}
		t.Cleanup(r.stop)
		return r
	}
	suspendedPasses := func(r *runner) float64 { return testutil.ToFloat64(r.b.metrics.passesC.WithLabelValues("suspended")) }
	ticks := ticker(t, 20*time.Millisecond) // passes write nothing a watch would see
	first := start("first")
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error {
		if suspendedPasses(first) < 3 {
			return fmt.Errorf("first: %v suspended passes", suspendedPasses(first))
		}
		return nil
	}, ticks))
	second := start("second")
	assert.Empty(t, placements(t, ctx, cli, name), "the suspended leader wrote nothing")
	assert.Equal(t, 1.0, testutil.ToFloat64(first.b.metrics.suspendedG))

	first.stop() // its session ends: the second is elected
	require.NoError(t, fleettest.WaitFor(20*time.Second, func() error {
		if suspendedPasses(second) < 3 {
			return fmt.Errorf("second: %v suspended passes", suspendedPasses(second))
		}
		return nil
	}, ticks))
	assert.Empty(t, placements(t, ctx, cli, name), "the new leader obeys the suspension")

	_, err = op.ResumeBalancer(ctx, fleet.Action{Actor: "alice", Reason: "thaw"})
	require.NoError(t, err)
	w := cli.Watch(ctx, keys.New(name).Placements(), clientv3.WithPrefix())
	if len(placements(t, ctx, cli, name)) == 0 {
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatal("no move after the resume")
		}
	}
	assert.NotEmpty(t, placements(t, ctx, cli, name))
	rep, err := op.Placement(ctx)
	require.NoError(t, err)
	st := rep.Balancer
	require.NotNil(t, st.LastPass, "the pass recorded itself")
	assert.NotEmpty(t, st.LastPass.Moves)
}
