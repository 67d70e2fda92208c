package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// value returns the value of the counter or gauge name with labels.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m := testsupport.MetricSample(t, reg, name, labels)
	require.NotNil(t, m, "no %s%v", name, labels)
	require.Nil(t, m.Histogram, "%s is a histogram", name)
	return testsupport.MetricValue(m)
}

// histogram returns the sample count and sum of the histogram name.
func histogram(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	m := testsupport.MetricSample(t, reg, name, labels)
	require.NotNil(t, m, "no %s%v", name, labels)
	require.NotNil(t, m.Histogram, name)
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// flakyFencer fails its first Advance and admits every later one.
type flakyFencer struct{ calls atomic.Int64 }

var errFlaky = errors.New("fence store unavailable")

func (f *flakyFencer) Advance(_ context.Context, _ fence.Token) error {
	if f.calls.Add(1) == 1 {
		return errFlaky
	}
	return nil
}

// TestMetrics scrapes one registry through a session's renewal, a failing
// fencer, a campaign won, a forced deletion of the leader key, a second
// election and a second candidate, Close and re-creation.
func TestMetrics(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	reg := prometheus.NewPedanticRegistry()

	// A registry where other metrics have the session metrics' names.
	other := prometheus.NewPedanticRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "tenure_session_opened_total", Help: "another"}))
	_, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: shortTTL, Metrics: other})
	require.ErrorIs(t, err, election.ErrMetrics)

	// A session on a clock that moves only when told: renewals are exact.
	clk := clockwork.NewFakeClockAt(time.Unix(1_000_000, 0))
	s, err := election.NewSession(ctx, cli, election.SessionConfig{
		TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second, Clock: clk, Metrics: reg,
	})
	require.NoError(t, err)
	defer s.Close(ctx)
	none := map[string]string{}
	assert.Equal(t, 1.0, value(t, reg, "tenure_session_opened_total", none))
	assert.Equal(t, 8.0, value(t, reg, "tenure_session_safe_deadline_margin_seconds", none))

	clk.Advance(3 * time.Second) // the first renewal is due
	require.Eventually(t, func() bool { return s.Status().Renewals == 1 }, wait, time.Millisecond)
	assert.Equal(t, 1.0, value(t, reg, "tenure_session_renewals_total", none))
	n, _ := histogram(t, reg, "tenure_session_renewal_duration_seconds", none)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, 0.0, value(t, reg, "tenure_session_renewal_failures_total", none))
	assert.Equal(t, 8.0, value(t, reg, "tenure_session_safe_deadline_margin_seconds", none), "renewed at +3s: deadline +11s, now +3s")
	st := s.Status()
	assert.Equal(t, clk.Now(), st.LastRenewal)
	assert.Zero(t, st.ConsecutiveFailures)

	// A failing fencer fails the first campaign; the second wins.
	ff := &flakyFencer{}
	cfg := election.ElectionConfig{Cluster: testCluster, Name: "billing", ID: "n1", Value: "addr-n1", Fencers: []fence.Fencer{ff}, Metrics: reg}
	e1, err := election.NewElection(s, cli, cli, cfg)
	require.NoError(t, err)
	l1 := map[string]string{"election": "billing", "candidate": "n1"}
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_is_leader", l1))
	_, err = e1.Campaign(ctx)
	require.ErrorIs(t, err, election.ErrFence)
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_fencer_failures_total", l1))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_campaign_failures_total", l1))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_terms_total", l1))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_is_leader", l1))

	term, err := e1.Campaign(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_terms_total", l1))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_is_leader", l1))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_campaign_failures_total", l1))
	st1 := e1.Status()
	assert.True(t, st1.Leader)
	assert.Equal(t, term.Token().Epoch, st1.Epoch)
	assert.Equal(t, clk.Now(), st1.Since)

	// A second election, and a second candidate of the first, share the registry.
	s2 := newSession(t, cli, shortTTL)
	e2, err := election.NewElection(s2, cli, cli, election.ElectionConfig{Cluster: testCluster, Name: "billing", ID: "n2", Metrics: reg})
	require.NoError(t, err)
	e3, err := election.NewElection(s2, cli, cli, election.ElectionConfig{Cluster: testCluster, Name: "reports", ID: "n2", Metrics: reg})
	require.NoError(t, err)
	l2 := map[string]string{"election": "billing", "candidate": "n2"}
	l3 := map[string]string{"election": "reports", "candidate": "n2"}
	res := campaignAsync(ctx, e2)
	waitCandidates(t, cli, e2, 2)
	term3, err := e3.Campaign(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_is_leader", l1))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_is_leader", l2))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_is_leader", l3))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems, "metric names and help follow Prometheus conventions")

	// An operator deletes the leader key: a forced release.
	clk.Advance(2 * time.Second)
	_, err = cli.Delete(ctx, term.Key())
	require.NoError(t, err)
	recv(t, term.Done(), "the term to end on the key's deletion")
	require.ErrorIs(t, term.Err(), election.ErrKeyDeleted)
	r := recv(t, res, "the second candidate to win")
	require.NoError(t, r.err)
	require.Eventually(t, func() bool {
		n, _ := histogram(t, reg, "tenure_election_term_duration_seconds", l1)
		return n == 1
	}, wait, time.Millisecond)
	_, sum := histogram(t, reg, "tenure_election_term_duration_seconds", l1)
	assert.Equal(t, 2.0, sum, "the term lasted 2s on the session's clock")
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_forced_releases_total", l1))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_is_leader", l1))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_is_leader", l2))
	assert.Equal(t, 1.0, value(t, reg, "tenure_election_terms_total", l2))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_forced_releases_total", l2))

	// A resigned term is measured, not counted as forced.
	require.NoError(t, term3.Resign(ctx))
	require.Eventually(t, func() bool {
		n, _ := histogram(t, reg, "tenure_election_term_duration_seconds", l3)
		return n == 1
	}, wait, time.Millisecond)
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_forced_releases_total", l3))
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_is_leader", l3))

	// The same name and ID cannot register twice; after Close they can.
	_, err = election.NewElection(s, cli, cli, cfg)
	require.ErrorIs(t, err, election.ErrMetrics)
	require.True(t, errors.As(err, new(prometheus.AlreadyRegisteredError)))
	require.NoError(t, e1.Close(ctx))
	require.NoError(t, e1.Close(ctx), "Close is idempotent")
	assert.Nil(t, testsupport.MetricSample(t, reg, "tenure_election_is_leader", l1), "Close unregisters")
	_, err = e1.Campaign(ctx)
	require.ErrorIs(t, err, election.ErrElectionClosed)
	e1b, err := election.NewElection(s, cli, cli, cfg)
	require.NoError(t, err)
	assert.Equal(t, 0.0, value(t, reg, "tenure_election_terms_total", l1), "re-created, counted from zero")

	// Closing elections holding a term resigns it.
	require.NoError(t, e2.Close(ctx))
	require.ErrorIs(t, r.term.Err(), election.ErrResigned)
	require.ErrorIs(t, r.term.Err(), election.ErrElectionClosed)
	require.NoError(t, e3.Close(ctx))
	require.NoError(t, e1b.Close(ctx))
	for _, name := range []string{"tenure_election_is_leader", "tenure_election_terms_total"} {
		for _, l := range []map[string]string{l1, l2, l3} {
			assert.Nil(t, testsupport.MetricSample(t, reg, name, l))
		}
	}

	// Sessions end: the loss is counted by cause across sessions.
	require.NoError(t, s.Close(ctx))
	assert.Equal(t, 1.0, value(t, reg, "tenure_session_losses_total", map[string]string{"cause": "closed"}))
	assert.Equal(t, 0.0, value(t, reg, "tenure_session_safe_deadline_margin_seconds", none), "no live session")

	s3 := openSession(t, cli, reg)
	assert.Equal(t, 2.0, value(t, reg, "tenure_session_opened_total", none))
	assert.Positive(t, value(t, reg, "tenure_session_safe_deadline_margin_seconds", none))
	_, err = cli.Revoke(ctx, s3.Lease())
	require.NoError(t, err)
	recv(t, s3.Done(), "the session to see its lease revoked")
	assert.Equal(t, 1.0, value(t, reg, "tenure_session_losses_total", map[string]string{"cause": "revoked"}))
	assert.Equal(t, 0.0, value(t, reg, "tenure_session_losses_total", map[string]string{"cause": "expired"}))
}

// openSession opens a TTL-2s session registering its metrics with reg,
// closed when the test ends.
func openSession(t *testing.T, cli clientv3.Lease, reg prometheus.Registerer) *election.Session {
	t.Helper()
	s, err := election.NewSession(testCtx(t), cli, election.SessionConfig{TTL: shortTTL, Metrics: reg})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}
