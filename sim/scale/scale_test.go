package scale

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.LessOrEqual(t, rep.Ring.Join.MeanRatio(), 1.2, "ring-only joins")
	assert.LessOrEqual(t, rep.Ring.Leave.MeanRatio(), 1.2, "ring-only leaves")
	assert.Contains(t, out.String(), "| rolling restart, per change |")
}

func TestRingFigures(t *testing.T) {
	rep, err := RingFigures(Config{RingNodes: 50, RingPartitions: 2048, RingSamples: 20})
	require.NoError(t, err)
	assert.Equal(t, 20, rep.Join.Samples)
	assert.Equal(t, 20, rep.Leave.Samples)
	assert.InDelta(t, 2048.0/51, rep.Join.Ideal, 1e-9)
	assert.InDelta(t, 2048.0/50, rep.Leave.Ideal, 1e-9)
	assert.GreaterOrEqual(t, rep.Join.Mean, rep.Join.Ideal*0.9, "a join moves about the new node's share")
	assert.Positive(t, rep.Build)
	assert.Equal(t, rep.Build*50, rep.FleetBuild)
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
