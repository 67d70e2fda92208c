package election_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestCampaignLeaderObserve(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	e := newElection(t, s, cli, "billing", "n1")

	_, err := e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	obs := e.Observe(obsCtx)
	o := recv(t, obs, "the initial state")
	assert.False(t, o.Elected)
	assert.Positive(t, o.Revision)

	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	require.NoError(t, term.Err())
	tok := term.Token()
	assert.Equal(t, "leader/billing", tok.Scope)
	assert.Equal(t, fence.LeaderScope("billing"), tok.Scope)
	assert.Positive(t, tok.Epoch)
	require.NoError(t, tok.Validate())
	assert.Equal(t, e.Prefix()+fmt.Sprintf("%x", int64(s.Lease())), term.Key(), "the leader key is this candidate's")

	l, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, election.Leader{ID: "n1", Value: "addr-n1", Epoch: tok.Epoch, Lease: s.Lease(), Key: term.Key()}, l)
	o = recv(t, obs, "the new leader")
	assert.True(t, o.Elected)
	assert.Equal(t, l, o.Leader)

	_, err = e.Campaign(ctx)
	assert.ErrorIs(t, err, election.ErrAlreadyCampaigning)

	// The Cmp guards writes to the term.
	resp, err := cli.Txn(ctx).If(term.Cmp()).Then(clientv3.OpPut("/data", "1")).Commit()
	require.NoError(t, err)
	assert.True(t, resp.Succeeded)

	require.NoError(t, term.Resign(ctx))
	require.NoError(t, term.Resign(ctx), "Resign is idempotent")
	assert.ErrorIs(t, term.Err(), election.ErrResigned)
	assert.ErrorIs(t, term.Err(), election.ErrNotLeader)
	assert.ErrorIs(t, context.Cause(term.Context()), election.ErrResigned)
	o = recv(t, obs, "no leader after resign")
	assert.False(t, o.Elected)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)

	resp, err = cli.Txn(ctx).If(term.Cmp()).Then(clientv3.OpPut("/data", "2")).Commit()
	require.NoError(t, err)
	assert.False(t, resp.Succeeded, "a resigned term's Cmp must fail")

	// The same Election campaigns again and gets a newer epoch.
	term2, err := e.Campaign(ctx)
	require.NoError(t, err)
	assert.Greater(t, term2.Token().Epoch, term.Token().Epoch)
	require.NoError(t, term2.Resign(ctx))
	stopObs()
	for range obs { // closed when its context is done
	}
}

// TestResignHandsOver: a graceful Resign hands leadership to the waiting
// candidate at once, with a larger epoch.
func TestResignHandsOver(t *testing.T) {
	c := cluster.New(t, 1)
	cli1, cli2 := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	c2 := newContest(t, ctx, cli1, cli2, "handover")
	e1, t1, res := c2.e1, c2.t1, c2.res
	select {
	case r := <-res:
		t.Fatalf("second candidate elected while the first leads: %v", r.err)
	default:
	}

	require.NoError(t, t1.Resign(ctx))
	r := recv(t, res, "the handover")
	require.NoError(t, r.err)
	assert.Greater(t, r.term.Token().Epoch, t1.Token().Epoch)
	l, err := e1.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "n2", l.ID)
	assert.Equal(t, r.term.Token().Epoch, l.Epoch)
	require.NoError(t, r.term.Resign(ctx))
}

// TestCrashFailover: the leader's client is closed without resigning. The
// follower becomes leader with a larger epoch once etcd expires the lease,
// and the old term's context was cancelled no later than its safe deadline.
func TestCrashFailover(t *testing.T) {
	c := cluster.New(t, 1)
	cli1, cli2 := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	c2 := newContest(t, ctx, cli1, cli2, "crash")
	s1, t1, res := c2.s1, c2.t1, c2.res
	cancelled := doneAt(t1.Done())

	require.NoError(t, cli1.Close()) // crash: no resign, no revoke

	r := recv(t, res, "the follower to take over")
	require.NoError(t, r.err)
	endedAt := recv(t, cancelled, "the old term to end")
	<-s1.Done()
	safeDeadline := s1.Status().SafeDeadline // final: no renewal after the session ended

	assert.Greater(t, r.term.Token().Epoch, t1.Token().Epoch, "the new leader's epoch must be larger")
	assert.ErrorIs(t, s1.Err(), election.ErrSessionExpired)
	assert.ErrorIs(t, t1.Err(), election.ErrNotLeader)
	assert.ErrorIs(t, t1.Err(), election.ErrSessionExpired)
	assert.False(t, endedAt.After(safeDeadline), "old term ended %v after its safe deadline", endedAt.Sub(safeDeadline))
	assert.True(t, endedAt.Before(r.at), "old term must end before the new one begins")
	t.Logf("old term ended %v before its safe deadline; new leader %v after the old term ended",
		safeDeadline.Sub(endedAt), r.at.Sub(endedAt))
	require.NoError(t, r.term.Resign(ctx))
}

// TestPartitionFencing cuts the leader off from etcd through its fault
// point. Its term ends before etcd expires its lease; the new leader's
// guarded txn succeeds; after the partition heals, the old leader's guarded
// txn fails and its token is stale at a fence.Gate.
func TestPartitionFencing(t *testing.T) {
	c := cluster.New(t, 1)
	cli1, fp := c.NewFaultyClient(t)
	cli2, observer := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	c2 := newContest(t, ctx, cli1, cli2, "partition")
	s1, t1, res := c2.s1, c2.t1, c2.res

	// Server-side expiry deletes the old leader's key; see it from outside.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	deleted := make(chan time.Time, 1)
	wch := observer.Watch(wctx, t1.Key(), clientv3.WithRev(t1.Token().Epoch+1))
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					deleted <- time.Now()
					return
				}
			}
		}
	}()
	cancelled := doneAt(t1.Done())

	fp.Blackhole()

	endedAt := recv(t, cancelled, "the partitioned term to end")
	expiredAt := recv(t, deleted, "etcd to expire the partitioned lease")
	r := recv(t, res, "the follower to take over")
	require.NoError(t, r.err)
	assert.True(t, endedAt.Before(expiredAt), "the old term must end before etcd expires its lease (ended %v after)", endedAt.Sub(expiredAt))
	assert.False(t, endedAt.After(s1.Status().SafeDeadline))
	assert.ErrorIs(t, t1.Err(), election.ErrSessionExpired)
	assert.Greater(t, r.term.Token().Epoch, t1.Token().Epoch)
	t.Logf("old term ended %v before etcd expired its lease", expiredAt.Sub(endedAt))

	// The new leader writes under its term and presents its token.
	var gate fence.Gate
	resp, err := cli2.Txn(ctx).If(r.term.Cmp()).Then(clientv3.OpPut("/data/x", "new")).Commit()
	require.NoError(t, err)
	assert.True(t, resp.Succeeded, "the new leader's guarded txn must succeed")
	require.NoError(t, gate.Advance(context.Background(), r.term.Token()))

	// The old leader comes back and tries to write under its old term.
	fp.Heal()
	var old *clientv3.TxnResponse
	require.Eventually(t, func() bool {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		old, err = cli1.Txn(tctx).If(t1.Cmp()).Then(clientv3.OpPut("/data/x", "old")).Commit()
		return err == nil
	}, wait, 10*time.Millisecond, "the healed client could not reach etcd")
	assert.False(t, old.Succeeded, "the old leader's guarded txn must fail")
	err = gate.Advance(context.Background(), t1.Token())
	assert.ErrorIs(t, err, fence.ErrStale, "the old leader's token must be stale")
	var stale *fence.StaleError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, r.term.Token().Epoch, stale.Current)

	got, err := cli2.Get(ctx, "/data/x")
	require.NoError(t, err)
	assert.Equal(t, "new", string(got.Kvs[0].Value))
	require.NoError(t, r.term.Resign(ctx))
}

// TestSessionDiesMidCampaign: a candidate whose session ends while it waits
// gets the session's error promptly, never leadership.
func TestSessionDiesMidCampaign(t *testing.T) {
	cases := []struct {
		name string
		kill func(t *testing.T, s *election.Session, admin *clientv3.Client, fp *cluster.FaultPoint)
		want error
	}{
		{"revoked", func(t *testing.T, s *election.Session, admin *clientv3.Client, _ *cluster.FaultPoint) {
			_, err := admin.Revoke(testCtx(t), s.Lease())
			require.NoError(t, err)
		}, election.ErrLeaseLost},
		{"closed", func(t *testing.T, s *election.Session, _ *clientv3.Client, _ *cluster.FaultPoint) {
			require.NoError(t, s.Close(testCtx(t)))
		}, election.ErrSessionClosed},
		{"partitioned", func(_ *testing.T, _ *election.Session, _ *clientv3.Client, fp *cluster.FaultPoint) {
			fp.Blackhole()
		}, election.ErrSessionExpired},
	}
	c := cluster.New(t, 1)
	admin := c.NewClient(t)
	ctx := testCtx(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "midcampaign" + string(rune('a'+i))
			leader := newElection(t, newSession(t, admin, shortTTL), admin, name, "leader")
			lt, err := leader.Campaign(ctx)
			require.NoError(t, err)

			cli, fp := c.NewFaultyClient(t)
			s := newSession(t, cli, shortTTL)
			e := newElection(t, s, cli, name, "candidate")
			res := campaignAsync(ctx, e)
			waitCandidates(t, admin, leader, 2)

			tc.kill(t, s, admin, fp)
			r := recv(t, res, "the campaign to fail")
			require.Error(t, r.err)
			assert.Nil(t, r.term)
			assert.ErrorIs(t, r.err, tc.want)
			assert.ErrorIs(t, r.err, election.ErrSessionDone)
			sessionEnded := recv(t, doneAt(s.Done()), "the session to end")
			assert.False(t, r.at.Before(sessionEnded.Add(-time.Second)), "sanity")
			fp.Heal()

			require.NoError(t, lt.Resign(ctx))
			if tc.name != "partitioned" { // a partitioned key waits for etcd's expiry
				_, err = leader.Leader(ctx)
				assert.ErrorIs(t, err, election.ErrNoLeader)
			}
		})
	}
}

// TestCampaignNeverWinsWithDeadLease revokes a waiting candidate's lease
// and then lets the leader resign: the candidate must not win. etcd's
// concurrency.Election, run the same way, reports a win.
func TestCampaignNeverWinsWithDeadLease(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	leader := newElection(t, newSession(t, admin, shortTTL), admin, "deadlease", "leader")
	lt, err := leader.Campaign(ctx)
	require.NoError(t, err)
	s := newSession(t, cli, 10*time.Second) // no renewal would notice soon
	e := newElection(t, s, cli, "deadlease", "candidate")
	res := campaignAsync(ctx, e)
	waitCandidates(t, admin, leader, 2)

	_, err = admin.Revoke(ctx, s.Lease())
	require.NoError(t, err)
	require.NoError(t, lt.Resign(ctx))
	r := recv(t, res, "the campaign to end")
	require.Error(t, r.err, "won with a dead lease")
	assert.ErrorIs(t, r.err, election.ErrLeaseLost)
	assert.ErrorIs(t, s.Err(), election.ErrLeaseLost, "the campaign tells the session")

	// For contrast, etcd's own election in the same situation.
	lsess, err := concurrency.NewSession(admin, concurrency.WithTTL(2))
	require.NoError(t, err)
	defer lsess.Close()
	csess, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(t, err)
	defer csess.Close()
	le := concurrency.NewElection(lsess, "/contrast")
	require.NoError(t, le.Campaign(ctx, "leader"))
	ce := concurrency.NewElection(csess, "/contrast")
	cres := make(chan error, 1)
	go func() { cres <- ce.Campaign(ctx, "candidate") }()
	require.Eventually(t, func() bool {
		r, err := admin.Get(ctx, "/contrast/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 2
	}, wait, 5*time.Millisecond)
	_, err = admin.Revoke(ctx, csess.Lease())
	require.NoError(t, err)
	require.NoError(t, le.Resign(ctx))
	t.Logf("concurrency.Election.Campaign with a revoked lease returned %v", recv(t, cres, "concurrency campaign"))
}

// TestKeyDeletedEndsTerm: an operator deleting the leader key ends the term.
func TestKeyDeletedEndsTerm(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	e := newElection(t, s, cli, "operator", "n1")
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	_, err = admin.Delete(ctx, term.Key())
	require.NoError(t, err)
	recv(t, term.Done(), "the term to end")
	assert.ErrorIs(t, term.Err(), election.ErrKeyDeleted)
	assert.ErrorIs(t, term.Err(), election.ErrNotLeader)
	require.NoError(t, s.Err(), "the session stands")

	// The Election campaigns again at once, with a new epoch.
	term2, err := e.Campaign(ctx)
	require.NoError(t, err)
	assert.Greater(t, term2.Token().Epoch, term.Token().Epoch)
	require.NoError(t, term2.Resign(ctx))
}

func TestCampaignCancelWithdraws(t *testing.T) {
	c := cluster.New(t, 1)
	cli1, cli2 := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	e1 := newElection(t, newSession(t, cli1, shortTTL), cli1, "cancel", "n1")
	s2 := newSession(t, cli2, shortTTL)
	e2 := newElection(t, s2, cli2, "cancel", "n2")
	t1, err := e1.Campaign(ctx)
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	res := campaignAsync(cctx, e2)
	waitCandidates(t, cli1, e1, 2)
	cancel()
	r := recv(t, res, "the cancelled campaign")
	assert.ErrorIs(t, r.err, context.Canceled)
	require.NoError(t, s2.Err())
	waitCandidates(t, cli1, e1, 1) // the candidacy was withdrawn

	require.NoError(t, t1.Resign(ctx))
	t2, err := e2.Campaign(ctx) // the Election is usable again
	require.NoError(t, err)
	require.NoError(t, t2.Resign(ctx))
}

// TestObserveSurvivesCompaction cuts an observer off, changes leaders and
// compacts etcd past the observer's watch: the observer resynchronizes and
// reports the current leader.
func TestObserveSurvivesCompaction(t *testing.T) {
	c := cluster.New(t, 1)
	cli1, cli2 := c.NewClient(t), c.NewClient(t)
	ocli, fp := c.NewFaultyClient(t)
	ctx := testCtx(t)
	e1 := newElection(t, newSession(t, cli1, shortTTL), cli1, "compact", "n1")
	e2 := newElection(t, newSession(t, cli2, shortTTL), cli2, "compact", "n2")
	observer, err := election.NewElection(nil, ocli, ocli, election.ElectionConfig{Cluster: testCluster, Name: "compact"})
	require.NoError(t, err)

	t1, err := e1.Campaign(ctx)
	require.NoError(t, err)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	obs := observer.Observe(octx)
	assert.Equal(t, "n1", recv(t, obs, "n1 leads").Leader.ID)

	fp.Blackhole()
	fp.DropConnections()
	require.NoError(t, t1.Resign(ctx))
	t2, err := e2.Campaign(ctx)
	require.NoError(t, err)
	for range 5 {
		_, err := cli1.Put(ctx, "/filler", "x")
		require.NoError(t, err)
	}
	got, err := cli1.Get(ctx, "/filler")
	require.NoError(t, err)
	_, err = cli1.Compact(ctx, got.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	fp.Heal()

	for {
		o := recv(t, obs, "the observer to catch up")
		if o.Elected && o.Leader.ID == "n2" {
			assert.Equal(t, t2.Token().Epoch, o.Leader.Epoch)
			break
		}
	}
	require.NoError(t, t2.Resign(ctx))
	o := recv(t, obs, "no leader")
	assert.False(t, o.Elected)
	stop()
	for range obs {
	}
}

type hookEvent struct {
	kind  string
	token fence.Token
}

func TestRun(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)

	var mu sync.Mutex
	var events []hookEvent
	record := func(kind string, tok fence.Token) {
		mu.Lock()
		events = append(events, hookEvent{kind, tok})
		mu.Unlock()
	}
	hooks := &election.Hooks{
		OnElected: func(_ context.Context, tok fence.Token) { record("elected", tok) },
		OnEnded:   func(tok fence.Token, reason error) { record("ended", tok) },
	}
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: testCluster, Name: "run", ID: "n1", Hooks: hooks})
	require.NoError(t, err)

	terms := make(chan fence.Token, 4)
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(runCtx, func(ctx context.Context, tok fence.Token) error {
			got, ok := fence.FromContext(ctx)
			if !ok || got != tok {
				return errors.New("the context does not carry the term's token")
			}
			record("fn", tok)
			terms <- tok
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	first := recv(t, terms, "the first term")
	assert.Equal(t, "leader/run", first.Scope)

	// An operator deletes the key: fn's context ends and Run campaigns again.
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	_, err = admin.Delete(ctx, l.Key)
	require.NoError(t, err)
	second := recv(t, terms, "the second term")
	assert.Greater(t, second.Epoch, first.Epoch)

	stop()
	assert.ErrorIs(t, recv(t, runErr, "Run to return"), context.Canceled)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader, "Run resigns when it stops")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []hookEvent{
		{"elected", first}, {"fn", first}, {"ended", first},
		{"elected", second}, {"fn", second}, {"ended", second},
	}, events)
}

func TestRunEndsWithSession(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	e := newElection(t, s, cli, "runlost", "n1")
	elected := make(chan struct{}, 1)
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(ctx, func(ctx context.Context, _ fence.Token) error {
			elected <- struct{}{}
			<-ctx.Done()
			return nil
		})
	}()
	recv(t, elected, "election")
	_, err := admin.Revoke(ctx, s.Lease())
	require.NoError(t, err)
	err = recv(t, runErr, "Run to return")
	assert.ErrorIs(t, err, election.ErrLeaseLost)

	// fn's own error while the term stands is returned.
	s2 := newSession(t, cli, shortTTL)
	e2 := newElection(t, s2, cli, "runfail", "n1")
	boom := errors.New("boom")
	err = e2.Run(ctx, func(context.Context, fence.Token) error { return boom })
	assert.ErrorIs(t, err, boom)
	_, err = e2.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader, "Run resigned before returning")
	assert.ErrorIs(t, e2.Run(ctx, nil), election.ErrInvalidConfig)
}
