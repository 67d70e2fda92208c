package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// staleOnce is a fencer that refuses the first token of partition p as
// stale, as a store that a newer owner had fenced would, and admits
// everything else.
type staleOnce struct {
	p    int
	kv   clientv3.KV // writes the newer revision the floor is refused at
	mu   sync.Mutex
	done bool
}

// Advance refuses the first token of partition p as stale, with a floor
// etcd has issued (a newer owner's epoch, as far as the node can tell).
func (f *staleOnce) Advance(ctx context.Context, t fence.Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Scope == fence.PartitionScope(f.p) && !f.done {
		f.done = true
		resp, err := f.kv.Put(ctx, "stale-once/newer", "")
		if err != nil {
			return err
		}
		return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: resp.Header.Revision}
	}
	return nil
}

func metricOf(t testing.TB, g prometheus.Gatherer, name, node string, kv ...string) float64 {
	t.Helper()
	labels := map[string]string{labelNode: node}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	v, ok := testsupport.LookupMetric(t, g, name, labels)
	require.True(t, ok, "%s%v not found", name, labels)
	return v
}

// waitMetric waits until the metric has the value want.
func waitMetric(t testing.TB, g prometheus.Gatherer, want float64, name, node string, kv ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := metricOf(t, g, name, node, kv...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			require.Equal(t, want, got, "%s node=%s %v", name, node, kv)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two nodes in one registry: join, a planned move, a forced release, a
// drain and a fencer that rejects a stale token, each counted exactly.
func TestNodeMetrics(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P = 8
	reg := prometheus.NewPedanticRegistry()

	cfgA := testConfig(t, "metrics", "a", P)
	cfgA.Metrics = reg
	cfgA.Fencers = []fence.Fencer{&staleOnce{p: 3, kv: cli}}
	a := join(t, cli, cfgA)
	waitStable(t, 20*time.Second, a)

	waitMetric(t, reg, P, "tenure_partition_acquisitions_total", "a")
	waitMetric(t, reg, P, "tenure_partitions_owned", "a")
	assert.Equal(t, float64(P), metricOf(t, reg, "tenure_partition_unowned_duration_seconds", "a"))
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_fencer_failures_total", "a"))
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_session_opened_total", "a"))
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_partition_claim_conflicts_total", "a"))
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_callback_queue_length", "a"))
	for _, r := range []string{"moved", "lost", "closed"} {
		assert.Equal(t, 0.0, metricOf(t, reg, "tenure_partition_releases_total", "a", "reason", r))
	}
	st := a.Status()
	require.Len(t, st.Partitions, P)
	time.Sleep(20 * time.Millisecond)
	assert.Greater(t, metricOf(t, reg, "tenure_partition_oldest_held_seconds", "a"), 0.0)

	// A planned move: b joins the same registry and takes its share.
	cfgB := testConfig(t, "metrics", "b", P)
	cfgB.Metrics = reg
	b := join(t, cli, cfgB)
	waitStable(t, 20*time.Second, a, b)
	moved := float64(len(b.Owned()))
	require.Positive(t, moved)
	waitMetric(t, reg, moved, "tenure_partition_releases_total", "a", "reason", "moved")
	waitMetric(t, reg, moved, "tenure_partition_handoff_duration_seconds", "a")
	waitMetric(t, reg, moved, "tenure_partition_acquisitions_total", "b")
	assert.Equal(t, moved, metricOf(t, reg, "tenure_partition_unowned_duration_seconds", "b"))
	assert.Equal(t, float64(P)-moved, metricOf(t, reg, "tenure_partitions_owned", "a"))
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_forced_releases_total", "a"))

	// A forced release of one of a's partitions: a sees its claim deleted
	// while its session lives, and claims the partition back.
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: "metrics"})
	require.NoError(t, err)
	victim := a.Owned()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = op.ForceRelease(ctx, fence.PartitionScope(victim), fleet.Action{Actor: "tester", Reason: "test"})
	require.NoError(t, err)
	waitMetric(t, reg, 1, "tenure_forced_releases_total", "a")
	waitMetric(t, reg, 1, "tenure_partition_releases_total", "a", "reason", "lost")
	waitMetric(t, reg, float64(P)+1, "tenure_partition_acquisitions_total", "a")
	waitStable(t, 20*time.Second, a, b)

	// A drain of b: b observes it and hands everything back.
	_, err = op.Drain(ctx, "b", fleet.Action{Actor: "tester", Reason: "test"})
	require.NoError(t, err)
	waitMetric(t, reg, 1, "tenure_drains_total", "b")
	waitMetric(t, reg, moved, "tenure_partition_releases_total", "b", "reason", "moved")
	waitMetric(t, reg, moved, "tenure_partition_handoff_duration_seconds", "b")
	waitMetric(t, reg, P, "tenure_partitions_owned", "a")
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_drains_total", "a"))
	assert.True(t, b.Status().Drained)
	assert.True(t, b.Status().Ready, "a drained node that is live is ready")

	// Close unregisters; the same node ID registers again when it rejoins.
	closeNode(t, b)
	_, ok := testsupport.LookupMetric(t, reg, "tenure_partition_acquisitions_total", map[string]string{labelNode: "b"})
	assert.False(t, ok, "b's metrics unregistered by Close")
	_, ok = testsupport.LookupMetric(t, reg, "tenure_session_opened_total", map[string]string{labelNode: "b"})
	assert.False(t, ok, "b's session metrics unregistered by Close")
	_, err = op.Undrain(ctx, "b", fleet.Action{Actor: "tester"})
	require.NoError(t, err)
	b2 := join(t, cli, cfgB)
	waitStable(t, 20*time.Second, a, b2)
	waitMetric(t, reg, moved, "tenure_partition_acquisitions_total", "b")
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_session_opened_total", "b"))
}

// A second node with the same ID in one registry (another cluster) cannot
// register its metrics: Join fails with ErrMetrics and registers nothing.
func TestNodeMetricsConflict(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(t, "m1", "a", 4)
	cfg.Metrics = reg
	join(t, cli, cfg)
	before, err := reg.Gather()
	require.NoError(t, err)

	cfg2 := testConfig(t, "m2", "a", 4)
	cfg2.Metrics = reg
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Join(ctx, cli, cfg2)
	require.ErrorIs(t, err, ErrMetrics)
	var are prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &are)
	after, err := reg.Gather()
	require.NoError(t, err)
	assert.Len(t, after, len(before))
	assert.Empty(t, etcdMembers(t, cli, "m2"))

	// A typed nil registerer is refused.
	cfg2.Metrics = (*prometheus.Registry)(nil)
	require.ErrorIs(t, cfg2.Validate(), ErrInvalidConfig)
}

// logLines decodes hclog's JSON lines.
func logLines(t testing.TB, buf *testsupport.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// waitLogged waits until cond holds for the lines of buf, checking again
// after each write, and fails the test with cond's last error after
// timeout.
func waitLogged(t testing.TB, buf *testsupport.Buffer, timeout time.Duration, cond func([]map[string]any) error) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		written := buf.Written()
		err := cond(logLines(t, buf))
		if err == nil {
			return
		}
		select {
		case <-written:
		case <-deadline:
			t.Fatalf("not logged after %v: %v", timeout, err)
		}
	}
}

// releasedLogged counts the partitions that node's log lines say were
// released for reason: the count of every line that releases partitions
// (a handoff batch's, a session loss's, a forced release's).
func releasedLogged(lines []map[string]any, node, reason string) int {
	n := 0
	for _, l := range lines {
		if fmt.Sprint(l["node"]) != node || fmt.Sprint(l["reason"]) != reason {
			continue
		}
		if m, _ := l["@message"].(string); strings.Contains(m, "released ") || strings.HasPrefix(m, "forced release observed") {
			if k, ok := l["count"].(float64); ok {
				n += int(k)
			}
		}
	}
	return n
}

// findLog returns the first line whose message starts with msg and has
// every field of want (with the value when not nil).
func findLog(lines []map[string]any, msg string, want map[string]any) map[string]any {
next:
	for _, l := range lines {
		if m, _ := l["@message"].(string); !strings.HasPrefix(m, msg) {
			continue
		}
		for k, v := range want {
			got, ok := l[k]
			if !ok || v != nil && fmt.Sprint(got) != fmt.Sprint(v) {
				continue next
			}
		}
		return l
	}
	return nil
}

// Every event is logged with its fields, and no credential is: the node
// reaches etcd through a client authenticated with a password.
func TestNodeEvents(t *testing.T) {
	c := cluster.New(t, 1)
	admin := c.NewClient(t)
	const user, password = "root", "s3cret-etcd-pa55word"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := admin.UserAdd(ctx, user, password)
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctx, user, "root")
	require.NoError(t, err)
	_, err = admin.AuthEnable(ctx)
	require.NoError(t, err)
	ccfg := cluster.ClientConfig(c.Endpoints())
	ccfg.Username, ccfg.Password = user, password
	cli, err := clientv3.New(ccfg)
	require.NoError(t, err)
	defer cli.Close()

	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: buf, JSONFormat: true})
	const P = 8
	cfgA := testConfig(t, "events", "a", P)
	cfgA.Logger = logger
	cfgA.Session.TTL = 10 * time.Second // an etcd with auth enabled answers slower
	cfgA.Fencers = []fence.Fencer{&staleOnce{p: 3, kv: cli}}
	a := join(t, cli, cfgA)
	waitStable(t, 20*time.Second, a)
	cfgB := testConfig(t, "events", "b", P)
	cfgB.Logger = logger
	cfgB.Session.TTL = 10 * time.Second // an etcd with auth enabled answers slower
	b := join(t, cli, cfgB)
	defer func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	}()
	waitStable(t, 20*time.Second, a, b)
	b0 := b.Owned()

	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: "events"})
	require.NoError(t, err)
	victim := a.Owned()[0]
	_, err = op.ForceRelease(ctx, fence.PartitionScope(victim), fleet.Action{Actor: "tester", Reason: "test"})
	require.NoError(t, err)
	// The forced release is logged once etcd has told the node that its
	// lease lives, which may come after the node last changed.
	waitLogged(t, buf, 10*time.Second, func(lines []map[string]any) error {
		if findLog(lines, "forced release observed", nil) == nil {
			return errors.New("no forced release logged")
		}
		return nil
	})
	waitStable(t, 20*time.Second, a, b)
	_, err = op.Drain(ctx, "b", fleet.Action{Actor: "tester", Reason: "test"})
	require.NoError(t, err)
	require.NoError(t, waitFor(10*time.Second, func() error {
		if len(b.Owned()) != 0 || len(a.Owned()) != P {
			return errors.New("drain not done")
		}
		return nil
	}, a, b))
	closeNode(t, b)
	closeNode(t, a)

	lines := logLines(t, buf)
	for _, e := range []struct {
		msg    string
		fields map[string]any
	}{
		{"joined", map[string]any{"node": "a", "lease": nil}},
		{"session opened", map[string]any{"node": "a", "lease": nil}},
		{"acquired 1 partition", map[string]any{"node": "a", "count": 1, "partitions": fmt.Sprint(victim), "epochs": nil, "longest_unowned_for": nil}},
		{"forced release observed", map[string]any{"node": "a", "reason": "lost", "count": 1, "partitions": fmt.Sprint(victim), "epochs": nil, "lease": nil}},
		{"fence rejection", map[string]any{"node": "a", "partition": 3, "scope": "p/3", "presented": nil, "current": nil}},
		{"drain observed", map[string]any{"node": "b", "lease": nil}},
		{"left the cluster", map[string]any{"node": "a"}},
		{"session closed", map[string]any{"node": "b", "lease": nil}},
	} {
		assert.NotNil(t, findLog(lines, e.msg, e.fields), "event %q with %v", e.msg, e.fields)
	}
	// A move batch is logged once, when its last claim is deleted, with
	// the partitions as ranges and how long the handoff took; a forced
	// release is not a session loss.
	moved := findLog(lines, "released ", map[string]any{"node": "a", "reason": "moved", "lease": nil, "count": nil, "partitions": nil, "handoff": nil})
	require.NotNil(t, moved, "a's moves to b")
	assert.Equal(t, len(b0), int(moved["count"].(float64)))
	assert.Equal(t, partitionRanges(b0), moved["partitions"])
	assert.Nil(t, findLog(lines, "session lost", map[string]any{"node": "a"}))
	assert.NotContains(t, buf.String(), password)
}

// Live and Ready, and the health handler's answers, before and after the
// node's session is lost to a blackholed etcd.
func TestNodeHealth(t *testing.T) {
	c := cluster.New(t, 1)
	faulty, fp := c.NewFaultyClient(t)
	buf := &testsupport.Buffer{}
	cfg := testConfig(t, "health", "a", 4)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: buf, JSONFormat: true})
	cfg.Metrics = prometheus.NewPedanticRegistry()
	a := join(t, faulty, cfg)
	waitStable(t, 20*time.Second, a)

	srv := httptest.NewServer(a.HealthHandler())
	defer srv.Close()
	get := func(path string) (int, healthAnswer) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var a healthAnswer
		require.NoError(t, json.Unmarshal(body, &a), string(body))
		return resp.StatusCode, a
	}
	assert.True(t, a.Status().Live)
	assert.True(t, a.Status().Ready)
	code, ans := get("/livez")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, ans.OK)
	code, ans = get("/healthz/readyz?verbose=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "readyz", ans.Check)
	require.NotNil(t, ans.Status)
	assert.Len(t, ans.Status.Partitions, 4)
	assert.Equal(t, 1, ans.Status.Members)
	assert.NotEmpty(t, ans.Status.Lease)
	assert.Positive(t, ans.Status.Session.Remaining)
	resp, err := http.Get(srv.URL + "/other")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	fp.Blackhole()
	require.NoError(t, waitFor(20*time.Second, func() error {
		if a.Status().Live {
			return errors.New("still live")
		}
		return nil
	}, a))
	assert.False(t, a.Status().Ready)
	code, ans = get("/livez")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.False(t, ans.OK)
	assert.Equal(t, "no live session: lost (expired)", ans.Reason)
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	// The loss is logged in one line once the generation has ended, which
	// may come after Live turns false.
	waitLogged(t, buf, 10*time.Second, func(lines []map[string]any) error {
		if n := releasedLogged(lines, "a", "lost"); n < 4 {
			return fmt.Errorf("%d of 4 lost partitions logged", n)
		}
		return nil
	})
	lines := logLines(t, buf)
	assert.NotNil(t, findLog(lines, "session lost", map[string]any{"node": "a", "lease": nil, "cause": "expired"}))
	assert.NotNil(t, findLog(lines, "session lost: released 4 partitions", map[string]any{"node": "a", "lease": nil, "cause": "expired", "count": 4, "partitions": "0-3"}))
	assert.NotNil(t, findLog(lines, "renewal attempt failed", map[string]any{"node": "a", "lease": nil}))

	fp.Heal()
	require.NoError(t, waitFor(30*time.Second, func() error {
		if !a.Status().Ready {
			return errors.New("not ready")
		}
		return nil
	}, a))
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, code)
}

// conflictingClient writes a foreign claim of partition victim just before
// the first transaction that claims it commits, as another node racing for
// it would.
type conflictingClient struct {
	txnHook
	claimKey string
	once     sync.Once
}

func newConflictingClient(cli *clientv3.Client, claimKey string) *conflictingClient {
	c := &conflictingClient{txnHook: txnHook{Client: cli}, claimKey: claimKey}
	c.commit = c.commitTxn
	return c
}

// commitTxn commits a transaction of the node's, then, after the foreign
// claim if it is the first to claim claimKey.
func (c *conflictingClient) commitTxn(ctx context.Context, then []clientv3.Op, do func() (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	claims := false
	for _, op := range then {
		if !op.IsTxn() {
			continue
		}
		_, nested, _ := op.Txn()
		for _, o := range nested {
			if o.IsPut() && string(o.KeyBytes()) == c.claimKey {
				claims = true
			}
		}
	}
	if claims {
		var err error
		c.once.Do(func() { _, err = c.Client.Put(ctx, c.claimKey, "other") })
		if err != nil {
			return nil, err
		}
	}
	return do()
}

// A claim beaten by another node's is counted as a conflict.
func TestNodeMetricsClaimConflict(t *testing.T) {
	c := cluster.New(t, 1)
	raw := c.NewClient(t)
	const P = 4
	cfg := testConfig(t, "conflict", "a", P)
	reg := prometheus.NewPedanticRegistry()
	cfg.Metrics = reg
	claimKey := keys.New("conflict").Claim(0)
	a := join(t, newConflictingClient(raw, claimKey), cfg)
	waitMetric(t, reg, 1, "tenure_partition_claim_conflicts_total", "a")
	waitMetric(t, reg, P-1, "tenure_partition_acquisitions_total", "a")
	assert.False(t, a.Status().Ready, "partition 0 is held by another")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := raw.Delete(ctx, claimKey)
	require.NoError(t, err)
	waitMetric(t, reg, P, "tenure_partition_acquisitions_total", "a")
	require.NoError(t, waitFor(10*time.Second, func() error {
		if !a.Status().Ready {
			return errors.New("not ready")
		}
		return nil
	}, a))
	assert.Equal(t, 1.0, metricOf(t, reg, "tenure_partition_claim_conflicts_total", "a"))
}
