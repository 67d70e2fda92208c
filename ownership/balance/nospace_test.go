package balance

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// waitLine waits until buf holds a line that contains s, and returns
// what follows its first occurrence.
func waitLine(t *testing.T, buf *testsupport.Buffer, s string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		written := buf.Written()
		if _, after, ok := strings.Cut(buf.String(), s); ok {
			return after
		}
		select {
		case <-written:
		case <-deadline:
			t.Fatalf("no line %q in:\n%s", s, buf.String())
		}
	}
}

// TestBalancerPausesUnderNoSpace: while etcd's NOSPACE alarm stands (a
// small quota filled), a pass is planned with the alarm listed and
// applies nothing (errAlarm, wrapping fleet.ErrNoSpace, counted as
// "alarm"); a balancer whose client cannot list alarms has its pass
// refused by etcd, with the same errors; a leading balancer logs once that
// it pauses and why. Once the space is reclaimed and the alarm disarmed,
// it says it resumes and its next pass moves partitions.
func TestBalancerPausesUnderNoSpace(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.QuotaBackendBytes = 4 << 20
	c := cluster.NewWithConfig(t, cfg)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "balance-nospace"
	skewedFleet(t, ctx, cli, name)
	_, term := campaign(t, ctx, cli, name, "only") // before the alarm: a campaign puts
	reg := prometheus.NewRegistry()
	buf := &testsupport.Buffer{}
	bcfg := Config{Cluster: name, Metrics: reg, Interval: 50 * time.Millisecond, Cooldown: time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf})}
	b, err := NewBalancer(cli, bcfg)
	require.NoError(t, err)
	_, err = cluster.Fill(ctx, cli)
	require.NoError(t, err)

	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Alarms)
	assert.Equal(t, "NOSPACE", pl.Alarms[0].Alarm)
	assert.NotEmpty(t, pl.Moves, "a paused balancer still plans")
	err = b.Apply(ctx, term, pl)
	require.ErrorIs(t, err, errAlarm)
	require.ErrorIs(t, err, fleet.ErrNoSpace)

	kvOnly, err := NewBalancer(struct{ clientv3.KV }{cli}, Config{Cluster: name, Metrics: reg})
	require.NoError(t, err)
	pl, err = kvOnly.Plan(ctx)
	require.NoError(t, err)
	require.Empty(t, pl.Alarms, "a client that cannot list alarms lists none")
	require.NotEmpty(t, pl.Moves)
	err = kvOnly.Apply(ctx, term, pl)
	require.ErrorIs(t, err, errAlarm, "etcd refuses the pass")
	require.ErrorIs(t, err, fleet.ErrNoSpace)
	assert.Empty(t, placements(t, ctx, cli, name))
	assert.Equal(t, 2.0, testutil.ToFloat64(b.metrics.passesC.WithLabelValues("alarm")))

	lctx, stop := context.WithCancel(ctx)
	var led sync.WaitGroup
	led.Go(func() { b.lead(lctx, term) })
	defer func() { stop(); led.Wait() }()
	after := waitLine(t, buf, "balancer paused: an etcd alarm stands; no pass is applied until it is disarmed")
	assert.Contains(t, after, "alarms=NOSPACE")
	assert.Empty(t, placements(t, ctx, cli, name))

	require.NoError(t, c.ReclaimSpace(ctx, cli))
	after = waitLine(t, buf, "balancer resumed: no etcd alarm stands")
	assert.Contains(t, after, "paused=")
	waitLine(t, buf, "balance pass applied")
	assert.NotEmpty(t, placements(t, ctx, cli, name))
	assert.Equal(t, 1, strings.Count(buf.String(), "balancer paused"), "one line a pause")
}
