package scale

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/ring"
)

// smallConfig is a fleet that runs every phase in a few seconds: 20 nodes
// x 1024 partitions (51 per node, in the range the design recommends:
// partitions >= 10x the fleet), rolling restart of the whole fleet.
func smallConfig(t *testing.T) Config {
	cfg := Config{
		Nodes:          20,
		Partitions:     1024,
		RingNodes:      20,
		RingPartitions: 1024,
		WaitTimeout:    time.Minute,
	}
	if testing.Verbose() {
		cfg.Progress = testWriter{t}
	}
	return cfg
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func TestRunSmallFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cfg := smallConfig(t)
	cfg.RingBoth = true
	rep, err := Run(ctx, cfg, &out)
	require.NoError(t, err, "every phase reaches a stable ring, and no partition ever has two servers")
	t.Log("\n" + out.String())

	require.NotNil(t, rep.Live)
	l := rep.Live
	assert.Equal(t, 20, l.Nodes)
	assert.EqualValues(t, 1024, l.BringUp.Acquired, "bring-up claims every partition once")
	require.Len(t, l.Phases, 4)
	byName := map[string]Phase{}
	for _, p := range l.Phases {
		byName[p.Name] = p
		assert.Positive(t, p.Changes, p.Name)
		assert.Positive(t, p.Etcd.Writes, p.Name)
		assert.Positive(t, p.Etcd.WatchEvents, p.Name)
		assert.Positive(t, p.Moved, p.Name)
		// The protocol moves exactly what the rings say: no partition is
		// acquired but for a change of its ring owner.
		assert.EqualValues(t, p.Moved, p.Acquired, "%s: acquisitions against diffRings", p.Name)
	}
	// Planned moves cost etcd round trips, no lease TTL; a crash costs
	// about a TTL of virtual time.
	for _, name := range []string{"join", "leave", "rolling restart"} {
		assert.Less(t, byName[name].MaxVirtual, time.Second, name)
	}
	crash := byName["crash"].Virtual
	assert.GreaterOrEqual(t, crash, DefaultTTL-DefaultTTL/3-time.Second, "not before the lease could expire")
	assert.LessOrEqual(t, crash, DefaultTTL+3*time.Second, "within TTL plus a few seconds")
	assert.Equal(t, 2*19, byName["rolling restart"].Changes, "19 live nodes after a leave and a crash, each restarted")
	// Over the many changes of a rolling restart, the moves stay within
	// 1.2x of P/N per change.
	assert.LessOrEqual(t, byName["rolling restart"].MoveRatio(), 1.2)
	assert.Positive(t, l.HeapPerNode)

	require.NotNil(t, rep.Ring)
	assert.Equal(t, ring.AlgorithmWeighted, rep.Ring.Algorithm, "the live fleet's algorithm, a new fleet's")
	for _, alg := range []ring.Algorithm{ring.AlgorithmBounded, ring.AlgorithmWeighted} {
		f := rep.Ring.Rule(alg)
		require.Equal(t, alg, f.Algorithm, "both algorithms' ring-only figures")
		assert.LessOrEqual(t, f.Join.MeanRatio(), 1.2, "%v: ring-only joins", alg)
		assert.LessOrEqual(t, f.Leave.MeanRatio(), 1.2, "%v: ring-only leaves", alg)
	}
	assert.Contains(t, out.String(), "| rolling restart, per change |")
}

func TestRingFigures(t *testing.T) {
	rep, err := RingFigures(Config{RingNodes: 50, RingPartitions: 2048, RingSamples: 20})
	require.NoError(t, err)
	require.Len(t, rep.Rules, 1)
	assert.Equal(t, ring.AlgorithmWeighted, rep.Algorithm, "the configured algorithm's figures, weighted by default")
	assert.Equal(t, rep.Rules[0], rep.RuleFigures)

	rep, err = RingFigures(Config{RingNodes: 50, RingPartitions: 2048, RingSamples: 20, RingBoth: true, RingAlgorithm: ring.AlgorithmBounded})
	require.NoError(t, err)
	require.Len(t, rep.Rules, 2)
	assert.Equal(t, ring.AlgorithmBounded, rep.Algorithm)
	for _, alg := range []ring.Algorithm{ring.AlgorithmBounded, ring.AlgorithmWeighted} {
		f := rep.Rule(alg)
		assert.Equal(t, alg, f.Algorithm)
		assert.Equal(t, 20, f.Join.Samples)
		assert.Equal(t, 20, f.Leave.Samples)
		assert.InDelta(t, 2048.0/51, f.Join.Ideal, 1e-9)
		assert.InDelta(t, 2048.0/50, f.Leave.Ideal, 1e-9)
		assert.GreaterOrEqual(t, f.Join.Mean, f.Join.Ideal*0.9, "a join moves about the new node's share")
		assert.GreaterOrEqual(t, f.Join.MaxRatio, f.Join.MeanRatio())
		assert.Positive(t, f.Build)
		assert.Equal(t, f.Build*50, f.FleetBuild)
	}

	// Every 10th node and joiner of weight 2: the weighted rule's ideal
	// counts the weights, the bounded rule's does not.
	rep, err = RingFigures(Config{RingNodes: 50, RingPartitions: 2048, RingSamples: 20, RingHeavy: 10, RingBoth: true})
	require.NoError(t, err)
	w := rep.Rule(ring.AlgorithmWeighted)
	assert.InDelta(t, (2*2048.0*2/57+18*2048.0/56)/20, w.Join.Ideal, 1e-9, "joiners 0 and 10 weigh 2 of 57, the others 1 of 56")
	assert.InDelta(t, 2048.0/51, rep.Rule(ring.AlgorithmBounded).Join.Ideal, 1e-9)
	var out bytes.Buffer
	require.NoError(t, (&Report{Config: Config{LoadFactor: 1.25}, Ring: rep}).WriteMarkdown(&out))
	assert.Contains(t, out.String(), "| weighted | join (50 -> 51) | 20 |")
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"small", Config{Nodes: 2, Partitions: 8}, true},
		{"one node", Config{Nodes: 1}, false},
		{"one node ring only", Config{Nodes: 1, RingOnly: true}, true},
		{"negative nodes", Config{Nodes: -1}, false},
		{"negative restarts", Config{Restarts: -1}, false},
		{"step too long", Config{TTL: 3 * time.Second, Step: time.Second}, false},
		{"bad load factor", Config{LoadFactor: 0.5}, false},
		{"negative quiet", Config{Quiet: -time.Millisecond}, false},
		{"unknown load model", Config{LoadModel: "pareto"}, false},
		{"negative ring heavy", Config{RingHeavy: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidConfig)
			}
		})
	}
	d := DefaultConfig()
	assert.Equal(t, 1000, d.Nodes)
	assert.Equal(t, 4096, d.Partitions)
	assert.Equal(t, 1000, d.Restarts)
}

// TestPlacementFigures: the load reports' writes follow the meter's rule
// (n nodes, one report each per max(10s, n/5 s): 5 a second at most), a
// balance pass is timed and applied in one etcd write, and balanceable
// load converges within the band.
func TestPlacementFigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := PlacementFigures(ctx, Config{Nodes: 100, Partitions: 1024, RingHeavy: 10, LoadModel: LoadUniform})
	require.NoError(t, err)
	assert.InDelta(t, 5, rep.Aligned, 0.05, "100 nodes, a report each per 20s")
	assert.InDelta(t, 5, rep.Spread, 0.05)
	assert.Equal(t, 100, rep.AlignedPeak, "nodes that joined at once write in the same second")
	assert.LessOrEqual(t, rep.SpreadPeak, 5)
	assert.Positive(t, rep.Plan)
	assert.Positive(t, rep.BalancerPlan)
	assert.EqualValues(t, 1, rep.ApplyWrites, "one transaction a pass")
	assert.Positive(t, rep.ApplyMoves)
	assert.LessOrEqual(t, rep.MaxMoves, 10, "1% of 1024 a pass")
	assert.Greater(t, rep.Before, 1.15)
	assert.LessOrEqual(t, rep.After, 1.15, "uniform load converges within the upper band")

	reports, spread := reportWrites(1000, true)
	assert.InDelta(t, 5, reports, 0.05, "1000 nodes: a report each per 200s")
	assert.Equal(t, 5, spread)
	reports, _ = reportWrites(10, false)
	assert.InDelta(t, 1, reports, 0.01, "10 nodes: a report each per 10s")
}

// TestLoadReportsLive: real nodes under load write their load reports by
// the meter's rule. 19 live nodes after the phases (a join, a leave and a
// crash): a report a node at most every max(10s, 19/5 s) = 10s, so about
// 1.9 writes a second, and nothing else writes in the stable fleet.
func TestLoadReportsLive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := smallConfig(t)
	cfg.SkipRing, cfg.Restarts, cfg.LoadReports = true, 1, time.Minute
	var out bytes.Buffer
	rep, err := Run(ctx, cfg, &out)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	ph := rep.Live.Phases[len(rep.Live.Phases)-1]
	require.Equal(t, "load reports", ph.Name)
	assert.GreaterOrEqual(t, ph.Virtual, time.Minute)
	perSecond := float64(ph.Etcd.Writes) / ph.Virtual.Seconds()
	assert.InDelta(t, 1.9, perSecond, 0.4, "%d writes in %v", ph.Etcd.Writes, ph.Virtual)
	assert.Contains(t, out.String(), "Load reports of the live fleet:")
}
