package election_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestSessionDeadlineOnInjectedClock checks the safe-deadline arithmetic on
// a clock that moves only when told to: the deadline is the send time of
// the last acknowledged renewal + TTL - margin, and the session expires on
// the injected clock, not on the system's.
func TestSessionDeadlineOnInjectedClock(t *testing.T) {
	c := cluster.New(t, 1)
	cli, fp := c.NewFaultyClient(t)
	clock := clockwork.NewFakeClockAt(time.Unix(1_000_000, 0))
	start := clock.Now()
	s, err := election.NewSession(testCtx(t), cli, election.SessionConfig{
		TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second, Clock: clock,
	})
	require.NoError(t, err)
	defer s.Close(testCtx(t))
	assert.Equal(t, start.Add(8*time.Second), s.Status().SafeDeadline, "grant: send time + TTL - margin")
	assert.Equal(t, 8*time.Second, s.Status().Remaining)

	clock.Advance(3 * time.Second) // the first renewal is due
	require.Eventually(t, func() bool { return s.Status().Renewals == 1 }, wait, time.Millisecond)
	assert.Equal(t, start.Add(11*time.Second), s.Status().SafeDeadline, "renewal sent at +3s")
	assert.Equal(t, time.Duration(0), s.Status().LastRenewLatency, "the clock did not move during the round trip")

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
	// The session's expiry timer was last set while the clock moved, so it
	// may fire up to one step late: move on in small steps, no further than
	// the safe deadline itself, until the session has ended.
	deadline := start.Add(11 * time.Second)
	for ended := false; !ended && clock.Now().Before(deadline); {
		select {
		case <-s.Done():
			ended = true
		default:
			clock.Advance(10 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	}
	recv(t, s.Done(), "the session to expire on the injected clock, by its safe deadline")
	assert.ErrorIs(t, s.Err(), election.ErrSessionExpired)
	assert.Equal(t, start.Add(11*time.Second), s.Status().SafeDeadline)
	fp.Heal()
}

// TestErrReadsTheClock: past the safe deadline, Err reports the session
// expired at once, without waiting for the goroutine that watches the
// deadline (a process resumed after a pause runs its own code first), and
// a Term of that session is over too.
func TestErrReadsTheClock(t *testing.T) {
	c := cluster.New(t, 1)
	cli, fp := c.NewFaultyClient(t)
	clk := clockwork.NewFakeClockAt(time.Unix(1_000_000, 0))
	s, err := election.NewSession(testCtx(t), cli, election.SessionConfig{
		TTL: 9 * time.Second, RenewInterval: 3 * time.Second, SafetyMargin: time.Second, Clock: clk,
	})
	require.NoError(t, err)
	defer s.Close(testCtx(t))
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: "errclock", Name: "job"})
	require.NoError(t, err)
	term, err := e.Campaign(testCtx(t))
	require.NoError(t, err)
	require.NoError(t, term.Err())

	fp.Blackhole() // renewals go unanswered from now on
	defer fp.Heal()
	clk.Advance(s.Status().SafeDeadline.Sub(clk.Now()))
	require.ErrorIs(t, s.Err(), election.ErrSessionExpired, "Err read the clock")
	require.ErrorIs(t, term.Err(), election.ErrNotLeader)
	require.ErrorIs(t, term.Err(), election.ErrSessionExpired)
}
