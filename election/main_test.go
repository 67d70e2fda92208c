package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// testCluster is the cluster name of every test election.
const testCluster = "test"

// shortTTL is the lease TTL of tests that wait for expiry: etcd's minimum.
const shortTTL = 2 * time.Second

// wait bounds every wait for an event in the tests; reaching it fails the
// test, it never decides an outcome.
const wait = 20 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newSession opens a session with ttl on cli and closes it when the test
// ends.
func newSession(t *testing.T, cli clientv3.Lease, ttl time.Duration) *election.Session {
	t.Helper()
	cfg := election.DefaultSessionConfig()
	cfg.TTL = ttl
	cfg.RenewInterval = 0
	cfg.SafetyMargin = 0
	s, err := election.NewSession(testCtx(t), cli, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// newElection returns candidate id in the election name.
func newElection(t *testing.T, s *election.Session, cli *clientv3.Client, name, id string) *election.Election {
	t.Helper()
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: testCluster, Name: name, ID: id, Value: "addr-" + id})
	require.NoError(t, err)
	return e
}

// recv returns the next value of ch, failing the test after wait.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out after %v waiting for %s", wait, what)
		panic("unreachable")
	}
}

// doneAt returns a channel that receives the instant ch was seen closed.
func doneAt(ch <-chan struct{}) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		<-ch
		out <- time.Now()
	}()
	return out
}

type campaignResult struct {
	term *election.Term
	err  error
	at   time.Time
}

// campaignAsync campaigns in the background.
func campaignAsync(ctx context.Context, e *election.Election) <-chan campaignResult {
	out := make(chan campaignResult, 1)
	go func() {
		term, err := e.Campaign(ctx)
		out <- campaignResult{term, err, time.Now()}
	}()
	return out
}

// waitCandidates waits until the election has n candidate keys.
func waitCandidates(t *testing.T, cli *clientv3.Client, e *election.Election, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(context.Background(), e.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == int64(n)
	}, wait, 5*time.Millisecond, "waiting for %d candidates", n)
}

// contest is two candidates of one election: the first leads, the second
// is campaigning behind it.
type contest struct {
	s1     *election.Session
	e1, e2 *election.Election
	t1     *election.Term        // the first candidate's term
	res    <-chan campaignResult // the second candidate's campaign
}

// newContest elects n1 (on cli1) in election name and has n2 (on cli2)
// campaign behind it, waiting until both candidacies are in etcd.
func newContest(t *testing.T, ctx context.Context, cli1, cli2 *clientv3.Client, name string) contest {
	t.Helper()
	var c contest
	c.s1 = newSession(t, cli1, shortTTL)
	c.e1 = newElection(t, c.s1, cli1, name, "n1")
	c.e2 = newElection(t, newSession(t, cli2, shortTTL), cli2, name, "n2")
	var err error
	c.t1, err = c.e1.Campaign(ctx)
	require.NoError(t, err)
	c.res = campaignAsync(ctx, c.e2)
	waitCandidates(t, cli2, c.e2, 2)
	return c
}
