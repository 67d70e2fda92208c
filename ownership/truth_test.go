package ownership

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/metrics/metricstest"
	"github.com/tenure-go/tenure/internal/testlog"
	"github.com/tenure-go/tenure/sim/cluster"
)

// histogramOf returns node's histogram name from g.
func histogramOf(t *testing.T, g prometheus.Gatherer, name, node string) *dto.Histogram {
	t.Helper()
	m := metricstest.Sample(t, g, name, map[string]string{LabelNode: node})
	require.NotNil(t, m, "%s node=%s", name, node)
	return m.GetHistogram()
}

// above returns how many observations of h exceed bound (a bucket's upper
// bound).
func above(t *testing.T, h *dto.Histogram, bound float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == bound {
			return h.GetSampleCount() - b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket with upper bound %v", bound)
	return 0
}

// A planned move of a partition with 300ms of work in flight: the handoff
// histogram observes, for that partition, the time from the end of its
// admission to the deletion of its claim, which includes the drain; the
// move batch is logged once, at its end, with that duration; and the new
// owner's unowned time starts at the deletion, not at the drain.
func TestHandoffDurationIncludesDrain(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, work = 8, 300 * time.Millisecond
	reg := prometheus.NewPedanticRegistry()
	buf := &testlog.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfgA := testConfig(t, "handoffdur", "a", P)
	cfgA.Metrics, cfgA.Logger = reg, logger
	a := join(t, cli, cfgA)
	waitStable(t, 20*time.Second, a)

	// The partitions that b's arrival moves to b; one of them is busy.
	ring, err := NewRing([]string{"a", "b"}, cfgA.Ring)
	require.NoError(t, err)
	var moving []int
	for p := range P {
		if owner, _ := ring.Owner(p); owner == "b" {
			moving = append(moving, p)
		}
	}
	require.NotEmpty(t, moving)
	busy := moving[0]
	held, err := a.HoldPartition(busy)
	require.NoError(t, err)
	stopped := held.Context.Done()
	released := make(chan struct{})
	go func() {
		defer close(released)
		// The work runs on while the partition drains: its context stays
		// live until it is done.
		for a.LookupPartition(busy).Local {
			<-a.Changed()
		}
		time.Sleep(work)
		held.Release()
	}()

	cfgB := testConfig(t, "handoffdur", "b", P)
	cfgB.Metrics, cfgB.Logger = reg, logger
	b := join(t, cli, cfgB)
	waitStable(t, 20*time.Second, a, b)
	<-released
	select {
	case <-stopped:
	default:
		t.Fatal("the busy partition's context is live after its handoff")
	}

	waitMetric(t, reg, float64(len(moving)), "tenure_partition_handoff_duration_seconds", "a")
	h := histogramOf(t, reg, "tenure_partition_handoff_duration_seconds", "a")
	assert.GreaterOrEqual(t, h.GetSampleSum(), work.Seconds(), "the drain's %v is in the handoff", work)
	assert.GreaterOrEqual(t, above(t, h, .25), uint64(1), "the busy partition's handoff took at least %v", work)

	// One line for the batch, written at its end, with its duration.
	var line map[string]any
	require.NoError(t, waitFor(10*time.Second, func() error {
		if line = findLog(logLines(t, buf), "released ", map[string]any{"node": "a", "reason": "moved"}); line == nil {
			return errors.New("no release logged")
		}
		return nil
	}, a))
	assert.Equal(t, float64(len(moving)), line["count"])
	assert.Equal(t, partitionRanges(moving), line["partitions"])
	assert.GreaterOrEqual(t, time.Duration(line["handoff"].(float64)), work)
	assert.Len(t, findLogs(logLines(t, buf), "released ", map[string]any{"node": "a"}), 1, "one line per move batch")

	// The receiving side: unowned from the deletion to serving, which the
	// drain does not lengthen.
	waitMetric(t, reg, float64(len(moving)), "tenure_partition_unowned_duration_seconds", "b")
	hb := histogramOf(t, reg, "tenure_partition_unowned_duration_seconds", "b")
	assert.Less(t, hb.GetSampleSum(), h.GetSampleSum(), "b's unowned time excludes a's drain")
}

// findLogs returns every line whose message starts with msg and has every
// field of want (with the value when not nil).
func findLogs(lines []map[string]any, msg string, want map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if findLog([]map[string]any{l}, msg, want) != nil {
			out = append(out, l)
		}
	}
	return out
}
