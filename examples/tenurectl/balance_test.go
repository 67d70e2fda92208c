package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// gauges returns the balancer's imbalance and member load gauges from reg.
func gauges(t *testing.T, reg *prometheus.Registry) (imbalance float64, loads map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	loads = map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "tenure_balance_imbalance":
				imbalance = m.GetGauge().GetValue()
			case "tenure_balance_member_load":
				loads[label(m, "member")] = m.GetGauge().GetValue()
			}
		}
	}
	return imbalance, loads
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestTenurectlBalance builds tenurectl and runs its balancer commands
// against a fleet in etcd (a spec, four members, one of weight 2, and load
// reports skewed onto n1) and a balancer in this process: the dry run
// prints the pass balance.Plan makes from what etcd holds; suspend and
// resume are refused without a reason, audited, obeyed by the balancer,
// and shown in the placement report, which reports the last pass and
// matches the balancer's metrics (imbalance, load per member) read at the
// same revision.
func TestTenurectlBalance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "ctl-balance"
	l := keys.New(name)
	cfg := ring.Config{Partitions: 64, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	_, err := fleetview.EnsureSpec(ctx, cli, l, cfg, false)
	require.NoError(t, err)
	members := []ring.Member{{ID: "n1", Weight: 1}, {ID: "n2", Weight: 1}, {ID: "n3", Weight: 1}, {ID: "n4", Weight: 2}}
	for _, m := range members {
		v, err := keys.EncodeMember(keys.Member{ID: m.ID, Addr: m.ID + ":1", Weight: m.Weight, Features: fleetview.Features()})
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Member(m.ID), v)
		require.NoError(t, err)
	}
	r, err := ring.NewWeighted(members, cfg)
	require.NoError(t, err)
	for _, m := range members {
		rep := keys.LoadReport{Window: 60}
		for i, p := range r.Owned(m.ID) {
			load := 1.0 + float64(i%3)
			if m.ID == "n1" {
				load *= 6
			}
			rep.Partitions = append(rep.Partitions, p)
			rep.Loads = append(rep.Loads, load)
		}
		_, err := cli.Put(ctx, l.Load(m.ID), keys.EncodeLoadReport(rep))
		require.NoError(t, err)
	}
	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "10s"}}
	reg := prometheus.NewRegistry()
	bcfg := balance.Config{Cluster: name, Budget: 0.05, Cooldown: 5 * time.Minute, Metrics: reg}
	b, err := balance.NewBalancer(cli, bcfg)
	require.NoError(t, err)
	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = sess.Close(context.Background()) }()
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "balancer"})
	require.NoError(t, err)
	defer func() { _ = e.Close(context.Background()) }()
	term, err := e.Campaign(ctx)
	require.NoError(t, err)

	// The dry run, with the defaults (no pass yet) and with flags: the
	// pass balance.Plan makes from the same revision.
	var dry struct {
		Rev       int64              `json:"revision"`
		Moves     []balance.Move     `json:"moves"`
		Before    float64            `json:"before"`
		Suspended *fleet.Mark        `json:"suspended"`
		Loads     map[string]float64 `json:"loads"`
		Config    planConfig         `json:"config"`
	}
	dry.Suspended, dry.Moves = nil, nil
	x.json(&dry, "balance", "plan")
	assert.Equal(t, "defaults", dry.Config.From)
	def, err := balance.NewBalancer(cli, balance.Config{Cluster: name})
	require.NoError(t, err)
	want, err := def.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, want.Rev, dry.Rev)
	assert.Equal(t, want.Moves, dry.Moves)
	require.Len(t, dry.Moves, 1, "1%% of 64 partitions: 1 move")
	assert.Greater(t, dry.Before, 1.15)
	dry.Suspended, dry.Moves = nil, nil
	x.json(&dry, "balance", "plan", "--budget", "0.05")
	assert.Equal(t, "defaults, flags", dry.Config.From)
	want, err = b.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, want.Moves, dry.Moves)
	assert.Len(t, dry.Moves, 3)
	assert.Contains(t, x.ok("balance", "plan"), "MOVE PARTITION")

	// Suspend: refused without a reason; then the balancer plans but moves
	// nothing, and the report and the dry run say so.
	res := x.run("balance", "suspend")
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.err, "--reason")
	var rec fleet.AuditRecord
	x.json(&rec, "balance", "suspend", "--reason", "incident 7", "--actor", "alice@ops")
	assert.Equal(t, "balance-suspend", rec.Action)
	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, b.Apply(ctx, term, pl), balance.ErrSuspended)
	var rep fleet.PlacementReport
	rep = fleet.PlacementReport{}
	x.json(&rep, "placement")
	require.NotNil(t, rep.Balancer.Suspended)
	assert.Equal(t, "incident 7", rep.Balancer.Suspended.Reason)
	assert.Empty(t, rep.Placements)
	assert.Contains(t, x.ok("placement"), "suspended by alice@ops: incident 7")
	dry.Suspended, dry.Moves = nil, nil
	x.json(&dry, "balance", "plan")
	require.NotNil(t, dry.Suspended)
	assert.Contains(t, x.ok("balance", "plan"), "the next pass writes nothing")

	// Resume: the pass lands; the report shows it, and the dry run takes
	// the last pass's configuration and honours its cooldown.
	res = x.run("balance", "resume", "--actor", "alice@ops")
	assert.Equal(t, 2, res.code)
	x.ok("balance", "resume", "--reason", "incident over", "--actor", "alice@ops")
	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Apply(ctx, term, pl))
	rep = fleet.PlacementReport{}
	x.json(&rep, "placement")
	assert.Nil(t, rep.Balancer.Suspended)
	require.NotNil(t, rep.Balancer.LastPass)
	lp := rep.Balancer.LastPass
	assert.Equal(t, pl.Rev, lp.Snapshot)
	assert.Equal(t, term.Token().Epoch, lp.Term)
	require.Len(t, lp.Moves, len(pl.Moves))
	for i, m := range pl.Moves {
		assert.Equal(t, fleet.BalancerMove(m), lp.Moves[i])
	}
	assert.Len(t, rep.Placements, len(pl.Moves))
	for _, st := range rep.Placements {
		assert.True(t, st.Moved.Equal(lp.Time.Truncate(time.Millisecond)), "partition %d moved at %v, the pass at %v", st.Partition, st.Moved, lp.Time)
	}
	assert.Contains(t, x.ok("placement"), "last pass:")
	dry.Suspended, dry.Moves = nil, nil
	x.json(&dry, "balance", "plan")
	assert.Equal(t, "last pass", dry.Config.From)
	assert.Equal(t, bcfg.Budget, dry.Config.Budget)
	assert.Equal(t, bcfg.Cooldown, dry.Config.Cooldown)
	for _, m := range dry.Moves {
		for _, moved := range pl.Moves {
			assert.NotEqual(t, moved.Partition, m.Partition, "moved by the last pass: in its cooldown")
		}
	}

	// The report matches the metrics of the balancer's snapshot at the
	// same revision: the load imbalance and each member's load.
	pl, err = b.Plan(ctx)
	require.NoError(t, err)
	rep = fleet.PlacementReport{}
	x.json(&rep, "placement")
	require.Equal(t, pl.Rev, rep.Revision, "nothing was written between the two reads")
	imb, loads := gauges(t, reg)
	assert.InDelta(t, imb, rep.LoadImbalance, 1e-9)
	require.Len(t, loads, len(rep.Members))
	for _, m := range rep.Members {
		assert.InDelta(t, loads[m.ID], m.Load, 1e-9, m.ID)
	}
	t.Logf("report at revision %d: load imbalance %.4f, metric %.4f; loads %v", rep.Revision, rep.LoadImbalance, imb, loads)

	var recs []fleet.AuditRecord
	x.json(&recs, "audit")
	require.Len(t, recs, 2)
	assert.Equal(t, "balance-suspend", recs[0].Action)
	assert.Equal(t, "balance-resume", recs[1].Action)
	assert.Equal(t, "balancer", recs[1].Target)
}
