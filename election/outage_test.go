package election_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestOutageBound(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		name string
		cfg  election.SessionConfig
		want time.Duration
	}{
		// TTL - margin - min(margin/4, 100ms) - cadence - 100ms.
		{"defaults: TTL 10s, every TTL/3, margin 1s", election.SessionConfig{}, 10*time.Second - time.Second - ms(100) - 10*time.Second/3 - ms(100)},
		{"TTL 2s: every 200ms, margin 500ms", election.SessionConfig{TTL: 2 * time.Second}, ms(1100)},
		{"TTL 3s: every 700ms", election.SessionConfig{TTL: 3 * time.Second}, ms(1600)},
		{"TTL 5s: every TTL/3", election.SessionConfig{TTL: 5 * time.Second}, 5*time.Second - ms(500) - ms(100) - 5*time.Second/3 - ms(100)},
		{"TTL 30s", election.SessionConfig{TTL: 30 * time.Second}, 30*time.Second - 3*time.Second - ms(100) - 10*time.Second - ms(100)},
		{"TTL 2.5s is granted as 3s; cadence from 2.5s (450ms)", election.SessionConfig{TTL: ms(2500)}, 3*time.Second - ms(500) - ms(100) - ms(450) - ms(100)},
		{"explicit", election.SessionConfig{TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second}, ms(4800)},
		{"small margin, small lead", election.SessionConfig{TTL: 5 * time.Second, RenewInterval: time.Second, SafetyMargin: ms(200)}, 5*time.Second - ms(200) - ms(50) - time.Second - ms(100)},
		{"large margin: cadence floor 100ms", election.SessionConfig{TTL: 2 * time.Second, SafetyMargin: ms(900)}, ms(800)},
		{"renewals too late for any outage", election.SessionConfig{TTL: 2 * time.Second, RenewInterval: ms(1400), SafetyMargin: ms(500)}, 0},
		{"invalid", election.SessionConfig{TTL: time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.cfg.OutageBound())
		})
	}

	// The default cadence rides out half the TTL and 100ms more at every
	// TTL: a 1s etcd leader failure at TTL 2s, a 5s one at TTL 10s.
	for ttl := 2 * time.Second; ttl <= 120*time.Second; ttl += 500 * time.Millisecond {
		cfg := election.SessionConfig{TTL: ttl}
		require.NoError(t, cfg.Validate())
		assert.GreaterOrEqual(t, cfg.OutageBound(), ttl/2+100*time.Millisecond, "TTL %v", ttl)
	}
}

// renewTap wraps a client's Lease to inject faults at renewals. arm makes
// the next KeepAliveOnce run a function first (start an outage just as a
// renewal falls due, the worst phase) and report the instant. While
// unanswered is set, KeepAliveOnce calls are never answered: they wait for
// their context even after it is cleared, as requests sent to a member
// that froze are.
type renewTap struct {
	clientv3.Lease
	mu         sync.Mutex
	armed      func()
	fired      chan time.Time
	unanswered atomic.Bool
}

func (l *renewTap) arm(f func()) <-chan time.Time {
	ch := make(chan time.Time, 1)
	l.mu.Lock()
	l.armed, l.fired = f, ch
	l.mu.Unlock()
	return ch
}

func (l *renewTap) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	l.mu.Lock()
	f, ch := l.armed, l.fired
	if ctx.Err() == nil { // not an attempt cancelled on its way here
		l.armed = nil
	} else {
		f = nil
	}
	l.mu.Unlock()
	if f != nil {
		f()
		ch <- time.Now()
	}
	if l.unanswered.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return l.Lease.KeepAliveOnce(ctx, id)
}

// TestSessionRidesOutOutages cuts a TTL-2s session off from etcd three times
// in a row, each time from the instant a renewal falls due (the worst phase)
// until just under the bound, and the session survives; then for longer,
// and the session ends with ErrSessionExpired before its safe deadline,
// having survived at least the bound. Two kinds of outage: a blackholed
// link (the proxy holds the bytes and delivers them after healing), and
// renewals that are never answered (a frozen member: attempts sent into the
// outage stay unanswered after it).
func TestSessionRidesOutOutages(t *testing.T) {
	c := cluster.New(t, 1)
	for _, kind := range []string{"blackhole", "unanswered"} {
		t.Run(kind, func(t *testing.T) {
			cli, fp := c.NewFaultyClient(t)
			tap := &renewTap{Lease: cli}
			start, stop := fp.Blackhole, fp.Heal
			if kind == "unanswered" {
				start, stop = func() { tap.unanswered.Store(true) }, func() { tap.unanswered.Store(false) }
			}
			s := newSession(t, tap, shortTTL)
			bound := s.OutageBound()
			require.Equal(t, election.SessionConfig{TTL: shortTTL}.OutageBound(), bound)
			require.GreaterOrEqual(t, bound, time.Second, "a TTL-2s session must ride out a 1s etcd leader failure")

			// The session ends lead = min(margin/4, 100ms) before its safe
			// deadline; an outage must end a retry interval before that for
			// the next attempt to be acknowledged in time. Cut it short by
			// under: "just under the bound".
			const lead, under = 100 * time.Millisecond, 200 * time.Millisecond
			for i := range 3 {
				steady(t, s, bound+lead+election.RenewRetryInterval)
				began := recv(t, tap.arm(start), fmt.Sprintf("renewal before outage %d", i))
				healAt := s.Status().SafeDeadline.Add(-lead - election.RenewRetryInterval - under)
				require.GreaterOrEqual(t, healAt.Sub(began), bound-under-50*time.Millisecond, "outage %d started in the worst phase or earlier", i)
				rideOut(t, s, healAt, stop)
				t.Logf("outage %d of %v survived (bound %v)", i, healAt.Sub(began), bound)
			}

			steady(t, s, bound+lead+election.RenewRetryInterval)
			began := recv(t, tap.arm(start), "renewal before the long outage")
			ended := recv(t, doneAt(s.Done()), "the session to end")
			stop()
			assert.ErrorIs(t, s.Err(), election.ErrSessionExpired)
			assert.False(t, ended.After(s.Status().SafeDeadline), "ended %v after its safe deadline", ended.Sub(s.Status().SafeDeadline))
			assert.GreaterOrEqual(t, ended.Sub(began), bound, "the session gave up before the bound")
			assert.Positive(t, s.Status().Failures)
			t.Logf("the session ended %v into the long outage (bound %v)", ended.Sub(began), bound)
		})
	}
}

// rideOut waits until the instant healAt of an outage that has begun, fails
// the test if the session ends meanwhile, calls heal, and waits until the
// session has a renewal acknowledged. Outages in other tests (an etcd
// leader frozen, a member killed) can be ridden out the same way.
func rideOut(t *testing.T, s *election.Session, healAt time.Time, heal func()) {
	t.Helper()
	timer := time.NewTimer(time.Until(healAt))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-s.Done():
		heal()
		t.Fatalf("the session ended %v before the outage was to end: %v", time.Until(healAt), s.Err())
	}
	heal()
	renewed(t, s)
}

// renewed waits until the session has acknowledged a renewal sent after the
// call.
func renewed(t *testing.T, s *election.Session) {
	t.Helper()
	n := s.Status().Renewals
	require.Eventually(t, func() bool { return s.Status().Renewals > n || s.Err() != nil }, wait, time.Millisecond)
	require.NoError(t, s.Err())
}

// steady waits until the session's last acknowledged renewal is recent: more
// than ahead remains before its safe deadline, so that no renewal is due and
// the next KeepAliveOnce is the next renewal falling due. ahead is
// TTL - margin - RenewInterval.
func steady(t *testing.T, s *election.Session, ahead time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Status().Remaining > ahead || s.Err() != nil }, wait, time.Millisecond)
	require.NoError(t, s.Err())
}
