//go:build unix

package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// address returns the child's address.
func (c *child) address() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// survivor is a node of the test's process whose metrics are served over
// HTTP, as a Prometheus server would scrape them.
type survivor struct {
	n   *Node
	reg *prometheus.Registry
	url string
}

// joinScraped joins node id of cluster with its own registry, served at
// the returned survivor's url.
func joinScraped(t *testing.T, cli Client, cfg Config) *survivor {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	cfg.Metrics = reg
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &survivor{n: join(t, cli, cfg), reg: reg, url: srv.URL}
}

// alertNodes returns the node label of each alert in fired.
func alertNodes(fired []labels.Labels) []string {
	var out []string
	for _, ls := range fired {
		out = append(out, ls.Get("node"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A node stopped (SIGSTOP) past its TTL, in its own process, is a
// failover, measured and told by the nodes that take its partitions over,
// and the README's suggested alerts fire for it:
//
//   - the survivors count each partition they took over once, under
//     lease_ended (its claim went with its member key: etcd expired the
//     lease), and record for each the time from the holder's last renewal
//     to serving (bounded by the lease's expiry minus the TTL the holder
//     published): at least the TTL, more than the TTL minus one renewal
//     interval, the least time the partition went unserved;
//   - each survivor that took partitions over logs one "took over" line
//     naming the cause, the holder, the partitions as ranges and the
//     longest time since the holder's last renewal, beside one "acquired"
//     line for the same claim transaction;
//   - scraped over HTTP and evaluated by Prometheus's engine, the
//     README's TenureFailover fires on those survivors,
//     TenureFenceRejections once a write under the stopped node's token
//     reaches the store, and TenureSessionLost on the stopped node once it
//     runs again; no other alert fires on the survivors;
//   - the partitions the ring moves back to the node once it has rejoined
//     are planned moves: no failover is counted for them.
func TestAlertsOnAPause(t *testing.T) {
	rules := readmeAlerts(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name, ttl = 32, "alertpause", 2 * time.Second
	storeReg := prometheus.NewPedanticRegistry()
	scfg := etcdfence.DefaultConfig()
	scfg.Cluster, scfg.Metrics = name, storeReg
	store, err := etcdfence.New(cli, scfg)
	require.NoError(t, err)
	storeSrv := httptest.NewServer(promhttp.HandlerFor(storeReg, promhttp.HandlerOpts{}))
	defer storeSrv.Close()
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfg := func(id string) Config {
		cfg := testConfig(t, name, id, P)
		cfg.Fencers = []fence.Fencer{store}
		cfg.Logger = logger
		return cfg
	}
	w := startChild(t, c.Endpoints(), name, "w", P)
	a, b := joinScraped(t, cli, cfg("a")), joinScraped(t, cli, cfg("b"))
	all := func(members ...string) error {
		return errors.Join(servedErr(a.n, members...), servedErr(b.n, members...))
	}
	require.NoError(t, waitFor(30*time.Second, func() error { return all("a", "b", "w") }, a.n, b.n))
	w.wait(t, "w ready", func() error { return w.ready() })
	var held []int
	for p := range P {
		if a.n.LookupPartition(p).Owner == "w" {
			held = append(held, p)
		}
	}
	require.NotEmpty(t, held)
	stale := fence.Token{Scope: fence.PartitionScope(held[0]), Epoch: a.n.LookupPartition(held[0]).Epoch} // w's

	var sc scrapes
	scrape := func(targets ...string) {
		t.Helper()
		for _, tg := range targets {
			switch tg {
			case "a":
				require.NoError(t, sc.scrape("a", a.url))
			case "b":
				require.NoError(t, sc.scrape("b", b.url))
			case "w":
				require.NoError(t, sc.scrape("w", "http://"+w.address()+"/metrics"))
			case "store":
				require.NoError(t, sc.scrape("store", storeSrv.URL))
			}
		}
	}
	scrape("a", "b", "w", "store")

	// The pause: etcd expires w's lease, a and b take its partitions over.
	require.NoError(t, w.proc.Stop())
	stopped := time.Now()
	require.NoError(t, waitFor(30*time.Second, func() error { return all("a", "b") }, a.n, b.n))
	t.Logf("from w stopped to the test seeing a and b serve everything: %v", time.Since(stopped))
	waitLogged(t, buf, 10*time.Second, func(lines []map[string]any) error {
		if n := loggedCount(findLogs(lines, "took over ", nil)); n != len(held) {
			return fmt.Errorf("%d partitions told taken over, %d held by w", n, len(held))
		}
		return nil
	})
	// A write under w's token, as w would make it on waking, reaches the
	// store: the floor its successor raised refuses it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = store.Put(ctx, stale, name+"/zombie", []byte("w"))
	require.ErrorIs(t, err, fence.ErrStale)
	scrape("a", "b", "store") // w, stopped, answers no scrape

	tookOver := map[string][]int{}
	var failovers float64
	for _, s := range []*survivor{a, b} {
		id := s.n.ID()
		n := metricOf(t, s.reg, "tenure_partition_failovers_total", id, "cause", "lease_ended")
		assert.Equal(t, 0.0, metricOf(t, s.reg, "tenure_partition_failovers_total", id, "cause", "rejoined"))
		failovers += n
		h := histogramOf(t, s.reg, "tenure_partition_failover_duration_seconds", id)
		assert.Equal(t, uint64(n), h.GetSampleCount(), "%s: an unserved time per partition taken over", id)
		assert.Equal(t, uint64(0), h.GetSampleCount()-above(t, h, ttl.Seconds()), "%s: every partition unserved for at least the TTL %v", id, ttl)
		assert.Equal(t, uint64(n), histogramOf(t, s.reg, "tenure_partition_takeover_duration_seconds", id).GetSampleCount())

		lines := findLogs(logLines(t, buf), "took over ", map[string]any{"node": id})
		if n == 0 {
			assert.Empty(t, lines, id)
			continue
		}
		require.Len(t, lines, 1, "%s: one line for the takeover", id)
		l := lines[0]
		assert.Equal(t, "lease_ended", l["cause"])
		assert.Equal(t, "w", l["holders"])
		assert.Equal(t, n, l["count"])
		assert.GreaterOrEqual(t, time.Duration(l["longest_since_renewal"].(float64)), ttl)
		acquired := findLogs(logLines(t, buf), "acquired ", map[string]any{"node": id, "epochs": l["epochs"]})
		require.Len(t, acquired, 1, "%s: one acquired line for the takeover's claim transaction", id)
		var ps []int
		for p := range P {
			if r := s.n.LookupPartition(p); r.Local && fmt.Sprint(r.Epoch) == fmt.Sprint(l["epochs"]) && slices.Contains(held, p) {
				ps = append(ps, p)
			}
		}
		assert.Equal(t, partitionRanges(ps), l["partitions"], id)
		tookOver[id] = ps
		to := histogramOf(t, s.reg, "tenure_partition_takeover_duration_seconds", id)
		t.Logf("%s: %q, %q; from w's last renewal: mean %.3fs, longest %v; takeover: mean %.4fs, longest %v",
			id, l["@message"], acquired[0]["@message"], h.GetSampleSum()/float64(h.GetSampleCount()),
			time.Duration(l["longest_since_renewal"].(float64)), to.GetSampleSum()/float64(to.GetSampleCount()), time.Duration(l["longest_takeover"].(float64)))
	}
	assert.Equal(t, float64(len(held)), failovers, "each partition w held is taken over once")
	assert.Equal(t, partitionRanges(held), partitionRanges(append(slices.Clone(tookOver["a"]), tookOver["b"]...)))

	// The alerts, at the last scrape: TenureFailover fires on the
	// survivors that took partitions over, TenureFenceRejections for the
	// store, nothing else fires.
	instants := sc.instants()
	now := instants[len(instants)-1]
	for _, r := range rules {
		fired := sc.firing(t, r.Expr, now)
		switch r.Alert {
		case "TenureFailover":
			assert.Equal(t, slices.Sorted(maps.Keys(tookOver)), alertNodes(fired), r.Alert)
		case "TenureFenceRejections":
			if assert.Len(t, fired, 1, r.Alert) {
				assert.Equal(t, "etcd", fired[0].Get("store"))
				assert.Equal(t, "partition", fired[0].Get("scope_kind"))
			}
		default:
			assert.Empty(t, fired, "%s fired after the pause: %s", r.Alert, r.Expr)
		}
	}

	// w runs again: it rejoins under a new lease, and the ring moves
	// partitions back to it, planned moves.
	require.NoError(t, w.proc.Signal(syscall.SIGCONT))
	require.NoError(t, waitFor(30*time.Second, func() error { return all("a", "b", "w") }, a.n, b.n))
	w.wait(t, "w ready again", func() error { return w.ready() })
	scrape("a", "b", "w", "store")
	instants = sc.instants()
	now = instants[len(instants)-1]
	for _, r := range rules {
		fired := alertNodes(sc.firing(t, r.Expr, now))
		switch r.Alert {
		case "TenureFailover":
			assert.Equal(t, slices.Sorted(maps.Keys(tookOver)), fired, r.Alert)
		case "TenureSessionLost":
			assert.Equal(t, []string{"w"}, fired, r.Alert)
		case "TenureFenceRejections": // checked above
		default:
			for _, n := range fired {
				assert.Equal(t, "w", n, "%s fired on a survivor: %s", r.Alert, r.Expr)
			}
			if len(fired) > 0 {
				t.Logf("%s fired on w, resumed", r.Alert)
			}
		}
	}
	m := w.metrics(t)
	assert.Equal(t, 0.0, w.metric(t, m, "tenure_partition_failovers_total", "cause", "lease_ended"), "w's partitions came back by planned moves")
	assert.Equal(t, 0.0, w.metric(t, m, "tenure_partition_failovers_total", "cause", "rejoined"))
	assert.Equal(t, failovers, metricOf(t, a.reg, "tenure_partition_failovers_total", "a", "cause", "lease_ended")+
		metricOf(t, b.reg, "tenure_partition_failovers_total", "b", "cause", "lease_ended"), "the moves back are no failover")
	t.Logf("w held %s; taken over by a %s, b %s", partitionRanges(held), partitionRanges(tookOver["a"]), partitionRanges(tookOver["b"]))
}
