package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// histogramOf returns node's histogram name from g.
func histogramOf(t *testing.T, g prometheus.Gatherer, name, node string) *dto.Histogram {
	t.Helper()
	m := testsupport.MetricSample(t, g, name, map[string]string{labelNode: node})
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
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfgA := testConfig(t, "handoffdur", "a", P)
	cfgA.Metrics, cfgA.Logger = reg, logger
	a := join(t, cli, cfgA)
	waitStable(t, 20*time.Second, a)

	// The partitions that b's arrival moves to b; one of them is busy.
	ring, err := ring.New([]string{"a", "b"}, cfgA.Ring)
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

// A session's end is told once, by what etcd records, however the node
// learns of it: the lease gone (expired or revoked) takes the member key
// and the claims with it, which is a session loss and never a forced
// release; a member key deleted while the lease lives is a loss of its own
// ("deleted"). Each case counts one loss under its cause, no forced
// release, every lost partition under reason lost, and logs one line that
// names them all.
func TestSessionLossToldOnce(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P = 8
	cases := []struct {
		name  string
		cause string
		setup func(cfg *Config)
		end   func(t *testing.T, n *Node, l keys.Layout)
	}{{
		// The session's clock stands still, as a paused process's timers
		// do: etcd expires the lease, and the node sees its keys deleted
		// while its session still looks alive to it. Its clock says the safe
		// deadline has not passed, so etcd's answer (no such lease) is told
		// as revoked.
		name: "lease expired unseen", cause: "revoked",
		setup: func(cfg *Config) { cfg.Session.Clock = clockwork.NewFakeClock() },
		end:   func(*testing.T, *Node, keys.Layout) {},
	}, {
		name: "lease revoked", cause: "revoked",
		end: func(t *testing.T, n *Node, _ keys.Layout) {
			id, err := strconv.ParseInt(n.Status().Lease, 16, 64)
			require.NoError(t, err)
			_, err = cli.Revoke(context.Background(), clientv3.LeaseID(id))
			require.NoError(t, err)
		},
	}, {
		name: "member key deleted", cause: "deleted",
		end: func(t *testing.T, n *Node, l keys.Layout) {
			_, err := cli.Delete(context.Background(), l.Member(n.ID()))
			require.NoError(t, err)
		},
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("told%d", i)
			reg := prometheus.NewPedanticRegistry()
			buf := &testsupport.Buffer{}
			cfg := testConfig(t, name, "a", P)
			cfg.Metrics = reg
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
			if tc.setup != nil {
				tc.setup(&cfg)
			}
			a := join(t, cli, cfg)
			waitStable(t, 20*time.Second, a)
			tc.end(t, a, keys.New(name))

			waitMetric(t, reg, 1, "tenure_session_losses_total", "a", "cause", tc.cause)
			waitMetric(t, reg, P, "tenure_partition_releases_total", "a", "reason", "lost")
			var line map[string]any
			require.NoError(t, waitFor(10*time.Second, func() error {
				if line = findLog(logLines(t, buf), "session lost: released", nil); line == nil {
					return errors.New("no loss logged")
				}
				return nil
			}, a))
			assert.Equal(t, 0.0, metricOf(t, reg, "tenure_forced_releases_total", "a"))
			for _, cause := range []string{"expired", "revoked", "deleted", "closed", "other"} {
				want := 0.0
				if cause == tc.cause {
					want = 1
				}
				assert.Equal(t, want, metricOf(t, reg, "tenure_session_losses_total", "a", "cause", cause), "cause %s", cause)
			}
			closeNode(t, a)
			lines := logLines(t, buf)
			assert.Equal(t, tc.cause, line["cause"])
			assert.Equal(t, float64(P), line["count"])
			assert.Equal(t, partitionRanges(slices.Collect(intRange(P))), line["partitions"])
			assert.Len(t, findLogs(lines, "session lost: released", nil), 1, "one line for the loss")
			assert.Empty(t, findLogs(lines, "forced release observed", nil))
		})
	}
}

// intRange yields 0, 1, ..., n-1.
func intRange(n int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}
