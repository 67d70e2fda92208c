package election_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// manualClock is a Clock that moves only when Advance is called.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{}
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Unix(1_000_000, 0), timers: make(map[*manualTimer]struct{})}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) election.Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (c *manualClock) NewTicker(d time.Duration) election.Ticker {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1), period: d}
	t.Reset(d)
	return manualTicker{t}
}

type manualTicker struct{ t *manualTimer }

func (t manualTicker) C() <-chan time.Time { return t.t.C() }
func (t manualTicker) Stop()               { t.t.Stop() }

// Advance moves the clock by d and fires the timers that are due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			select {
			case t.ch <- c.now:
			default:
			}
			if t.period > 0 {
				t.at = t.at.Add(t.period)
			} else {
				delete(c.timers, t)
			}
		}
	}
	c.mu.Unlock()
}

type manualTimer struct {
	c      *manualClock
	ch     chan time.Time
	at     time.Time
	period time.Duration
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, active := t.c.timers[t]
	delete(t.c.timers, t)
	return active
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	_, active := t.c.timers[t]
	select { // like time.Timer since Go 1.23: no stale value after Reset
	case <-t.ch:
	default:
	}
	t.at = t.c.now.Add(d)
	t.c.timers[t] = struct{}{}
	t.c.mu.Unlock()
	if d <= 0 {
		t.c.Advance(0)
	}
	return active
}

// TestSessionDeadlineOnInjectedClock checks the safe-deadline arithmetic on
// a clock that moves only when told to: the deadline is the send time of
// the last acknowledged renewal + TTL - margin, and the session expires on
// the injected clock, not on the system's.
func TestSessionDeadlineOnInjectedClock(t *testing.T) {
	c := cluster.New(t, 1)
	cli, fp := c.NewFaultyClient(t)
	clock := newManualClock()
	start := clock.Now()
	s, err := election.NewSession(testCtx(t), cli, election.SessionConfig{
		TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second, Clock: clock,
	})
	require.NoError(t, err)
	defer s.Close(testCtx(t))
	assert.Equal(t, start.Add(8*time.Second), s.SafeDeadline(), "grant: send time + TTL - margin")
	assert.Equal(t, 8*time.Second, s.Stats().Remaining)

	clock.Advance(3 * time.Second) // the first renewal is due
	require.Eventually(t, func() bool { return s.Stats().Renewals == 1 }, wait, time.Millisecond)
	assert.Equal(t, start.Add(11*time.Second), s.SafeDeadline(), "renewal sent at +3s")
	assert.Equal(t, time.Duration(0), s.Stats().LastRenewLatency, "the clock did not move during the round trip")

	fp.Blackhole()
	// Renewals now hang; their timeouts and retries run on the injected
	// clock. Move it in steps up to the instant the session must give up:
	// the safe deadline (+11s) minus its lead of min(margin/4, 100ms).
	end := start.Add(11*time.Second - 100*time.Millisecond)
	for clock.Now().Before(end) {
		require.NoError(t, s.Err(), "the session ended at %v, before its time", clock.Now().Sub(start))
		clock.Advance(min(50*time.Millisecond, end.Sub(clock.Now())))
		time.Sleep(time.Millisecond) // pace the steps; the outcome does not depend on it
	}
	recv(t, s.Done(), "the session to expire on the injected clock")
	assert.ErrorIs(t, s.Err(), election.ErrSessionExpired)
	assert.Equal(t, start.Add(11*time.Second), s.SafeDeadline())
	fp.Heal()
}
