package election_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// logs captures an hclog.Logger's JSON output.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func newLogs() (*logs, hclog.Logger) {
	l := &logs{}
	return l, hclog.New(&hclog.LoggerOptions{Name: "tenure", Output: l, JSONFormat: true, Level: hclog.Debug})
}

// entries returns the captured entries whose message is msg.
func (l *logs) entries(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e["@message"] == msg {
			out = append(out, e)
		}
	}
	return out
}

// find returns the first entry with msg whose fields include want, failing
// the test if there is none; want values "*" only require the field.
func (l *logs) find(t *testing.T, msg string, want map[string]any) map[string]any {
	t.Helper()
	var found []map[string]any
next:
	for _, e := range l.entries(t, msg) {
		found = append(found, e)
		for k, v := range want {
			got, ok := e[k]
			if !ok || (v != "*" && got != v) {
				continue next
			}
		}
		return e
	}
	t.Fatalf("no %q event with %v among %v", msg, want, found)
	return nil
}

func TestEvents(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	captured, log := newLogs()

	s, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: shortTTL, Logger: log})
	require.NoError(t, err)
	lease := fmtHex(int64(s.Lease()))
	captured.find(t, "session opened", map[string]any{"lease": lease, "ttl": "*", "outage_bound": "*", "@level": "info"})

	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{
		Cluster: testCluster, Name: "billing", ID: "n1", Logger: log, Fencers: []fence.Fencer{&flakyFencer{}},
	})
	require.NoError(t, err)
	_, err = e.Campaign(ctx)
	require.ErrorIs(t, err, election.ErrFence)
	self := map[string]any{"election": "billing", "candidate": "n1", "lease": lease}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range self {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	captured.find(t, "fencer failed; giving the term up", with("epoch", "*", "fencer", 0.0, "error", errFlaky.Error(), "@level", "warn"))

	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	epoch := float64(term.Token().Epoch)
	captured.find(t, "fencers advanced", with("epoch", epoch, "fencers", 1.0, "duration", "*"))
	captured.find(t, "elected", with("epoch", epoch, "@level", "info"))
	captured.find(t, "leader observed changed", with("leader", "n1", "leader_epoch", epoch, "leader_lease", lease))

	// An operator deletes the key.
	_, err = cli.Delete(ctx, term.Key())
	require.NoError(t, err)
	recv(t, term.Done(), "the term to end")
	require.Eventually(t, func() bool { return len(captured.entries(t, "term ended")) == 1 }, wait, time.Millisecond)
	captured.find(t, "term ended", with("epoch", epoch, "reason", "key_deleted", "duration", "*", "error", "*", "@level", "warn"))

	// Resigned.
	term, err = e.Campaign(ctx)
	require.NoError(t, err)
	require.NoError(t, term.Resign(ctx))
	require.Eventually(t, func() bool { return len(captured.entries(t, "term ended")) == 2 }, wait, time.Millisecond)
	captured.find(t, "term ended", with("epoch", float64(term.Token().Epoch), "reason", "resigned", "@level", "info"))

	// Observed changes: no leader, then another candidate.
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)
	captured.find(t, "leader observed changed", with("leader", ""))
	other := newElection(t, newSession(t, cli, shortTTL), cli, "billing", "n2")
	t2, err := other.Campaign(ctx)
	require.NoError(t, err)
	_, err = e.Leader(ctx)
	require.NoError(t, err)
	captured.find(t, "leader observed changed", with("leader", "n2", "leader_epoch", float64(t2.Token().Epoch)))
	require.NoError(t, t2.Resign(ctx))
	obs := e.Status().Observed
	assert.Equal(t, "n2", obs.Leader.ID)
	assert.Positive(t, obs.Revision)

	// The session is lost (revoked) while a term stands.
	term, err = e.Campaign(ctx)
	require.NoError(t, err)
	_, err = cli.Revoke(ctx, s.Lease())
	require.NoError(t, err)
	recv(t, s.Done(), "the session to end")
	require.Eventually(t, func() bool { return len(captured.entries(t, "session lost")) == 1 }, wait, time.Millisecond)
	captured.find(t, "session lost", map[string]any{"lease": lease, "cause": "revoked", "error": "*", "@level": "warn"})
	require.Eventually(t, func() bool { return len(captured.entries(t, "term ended")) == 3 }, wait, time.Millisecond)
	captured.find(t, "term ended", with("epoch", float64(term.Token().Epoch), "reason", "session_lost"))

	s2, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: shortTTL, Logger: log})
	require.NoError(t, err)
	require.NoError(t, s2.Close(ctx))
	captured.find(t, "session closed", map[string]any{"lease": fmtHex(int64(s2.Lease())), "cause": "closed", "@level": "info"})
	require.NoError(t, e.Close(ctx))

	// No secret and nothing unexpected: every entry is one of the events.
	for _, line := range strings.Split(strings.TrimSpace(captured.buf.String()), "\n") {
		assert.NotContains(t, strings.ToLower(line), "password", line)
	}
}

// TestRenewalEvents follows a session through an outage on a clock that
// moves only when told: failed attempts at Debug, one Warn once the margin
// falls below half the outage bound, the recovery, then the loss.
func TestRenewalEvents(t *testing.T) {
	c := cluster.New(t, 1)
	cli, fp := c.NewFaultyClient(t)
	captured, log := newLogs()
	reg := prometheus.NewPedanticRegistry()
	clk := clockwork.NewFakeClockAt(time.Unix(1_000_000, 0))
	start := clk.Now()
	s, err := election.NewSession(testCtx(t), cli, election.SessionConfig{
		TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second, Clock: clk, Logger: log, Metrics: reg,
	})
	require.NoError(t, err)
	defer s.Close(testCtx(t))
	require.Equal(t, 4800*time.Millisecond, s.OutageBound())
	lease := fmtHex(int64(s.Lease()))

	clk.Advance(3 * time.Second)
	require.Eventually(t, func() bool { return s.Status().Renewals == 1 }, wait, time.Millisecond)

	// etcd unreachable from +3s: the renewal due at +6s fails; the margin
	// (deadline +11s) falls below half the bound (2.4s) after +8.6s.
	fp.Blackhole()
	step := func(until time.Duration, done func() bool) {
		for clk.Now().Before(start.Add(until)) && !done() {
			clk.Advance(50 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	}
	never := func() bool { return false }
	step(8500*time.Millisecond, never)
	require.NotEmpty(t, captured.entries(t, "renewal attempt failed; retrying within 100ms"))
	assert.Empty(t, captured.entries(t, "renewal failing: safe deadline margin low"))
	captured.find(t, "renewal attempt failed; retrying within 100ms",
		map[string]any{"lease": lease, "latency": "*", "remaining": "*", "error": "*", "@level": "debug"})
	step(9*time.Second, never)
	require.Eventually(t, func() bool { return len(captured.entries(t, "renewal failing: safe deadline margin low")) == 1 }, wait, time.Millisecond)
	captured.find(t, "renewal failing: safe deadline margin low",
		map[string]any{"lease": lease, "latency": "*", "remaining": "*", "outage_bound": "*", "@level": "warn"})
	st := s.Status()
	assert.Positive(t, st.ConsecutiveFailures)

	fp.Heal()
	step(10800*time.Millisecond, func() bool { return s.Status().Renewals >= 2 })
	require.NoError(t, s.Err(), "renewed before the deadline")
	require.Eventually(t, func() bool { return len(captured.entries(t, "renewal recovered")) == 1 }, wait, time.Millisecond)
	captured.find(t, "renewal recovered", map[string]any{"lease": lease, "failures": "*", "@level": "info"})
	assert.Zero(t, s.Status().ConsecutiveFailures)
	assert.Len(t, captured.entries(t, "renewal failing: safe deadline margin low"), 1, "one warning per outage")

	// Cut off for good: the session expires on its clock.
	fp.Blackhole()
	for s.Err() == nil && clk.Since(start) < time.Minute {
		clk.Advance(50 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	recv(t, s.Done(), "the session to expire")
	require.ErrorIs(t, s.Err(), election.ErrSessionExpired)
	require.Eventually(t, func() bool { return len(captured.entries(t, "session lost")) == 1 }, wait, time.Millisecond)
	captured.find(t, "session lost", map[string]any{"lease": lease, "cause": "expired", "@level": "warn"})
	assert.Len(t, captured.entries(t, "renewal failing: safe deadline margin low"), 2)
	fp.Heal()

	assert.Equal(t, 1.0, value(t, reg, "tenure_session_losses_total", map[string]string{"cause": "expired"}))
	assert.Equal(t, float64(s.Status().Failures), value(t, reg, "tenure_session_renewal_failures_total", map[string]string{}))
	assert.Positive(t, s.Status().Failures)
	assert.Equal(t, float64(s.Status().Renewals), value(t, reg, "tenure_session_renewals_total", map[string]string{}))
}

func fmtHex(v int64) string { return strconv.FormatInt(v, 16) }
