package election

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/nilness"
)

const (
	// DefaultTTL is the lease TTL of a Session when SessionConfig.TTL is zero.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL a Session accepts: etcd's own minimum lease
	// TTL with its default timing.
	MinTTL = 2 * time.Second
	// renewRetryInterval, the retry interval R of SessionConfig, is the
	// longest a Session waits, while a renewal is due and unacknowledged,
	// before it sends another attempt: after a failed attempt, and
	// alongside an attempt that has not been answered yet (a member that
	// hangs does not hold the session: the new attempt opens a new stream,
	// which the client's balancer may send to another endpoint).
	renewRetryInterval = 100 * time.Millisecond
	// minMargin is the floor of the default safety margin.
	minMargin = 500 * time.Millisecond
	// maxLead caps the lead by which a session ends before its safe deadline.
	maxLead = 100 * time.Millisecond
	// renewAttemptTimeout bounds one renewal attempt. Attempts overlap, so it
	// bounds only the attempts in flight (about renewAttemptTimeout /
	// renewRetryInterval), not how long an outage the session survives.
	renewAttemptTimeout = time.Second
	// minDefaultRenewInterval is the shortest default renewal cadence.
	minDefaultRenewInterval = 100 * time.Millisecond
	// outageSlack is how far the default cadence keeps OutageBound above TTL/2.
	outageSlack = 100 * time.Millisecond
)

// SessionConfig holds the tunables of a Session. The zero value of each
// field selects its documented default; DefaultSessionConfig returns them
// filled in.
//
// # Outages a session survives
//
// A session renews its lease every RenewInterval. A renewal that fails, or
// is not answered within the retry interval R = 100ms, is followed by another
// attempt — attempts overlap, each is given up after 1s, and none is sent
// or waited for past the safe deadline — until one is acknowledged or the
// session ends. Each retry asks a *clientv3.Client to reconnect at once
// if it is waiting to (gRPC's reconnect backoff starts at 1s and grows),
// so that an etcd member restarted within the bound is reached in time. The safe deadline counts from the send time of the last
// acknowledged renewal (the etcd client's own keepalive counts from the
// response's arrival, which overstates the lease by a round trip), and the
// session ends lead = min(SafetyMargin/4, 100ms) before it. An etcd
// unavailability of length D — no renewal answered, in the worst phase:
// starting just as a renewal falls due, one RenewInterval after the last
// acknowledged send — therefore ends the session only if
//
//	D > OutageBound = TTL - SafetyMargin - lead - RenewInterval - R
//
// (minus twice the renewal round trip, negligible on a LAN). etcd itself
// does not expire the lease first: it counts from its own receipt of a
// renewal, later than the send, and a new etcd leader restarts every
// lease's countdown, which only extends it. So the session, not etcd,
// decides, and OutageBound is what a failure of etcd costs nothing under.
//
// The default cadence is TTL/3, shortened where needed (small TTLs) so that
// OutageBound is at least TTL/2 + 100ms: with the default margin, 1.1s at
// TTL 2s (renewals every 200ms) and 5.47s at TTL 10s (every 3.33s). For
// scale: an etcd leader that crashes for good is replaced after one to two
// election timeouts (1s each by default, randomized) plus a round trip, so
// a TTL-2s session rides out a leader that stalls for 1s, while riding out
// any leader crash at etcd's default timing takes TTL 5s (2.63s) or more.
//
// # Choosing a TTL
//
// Pick the TTL from two constraints. It must exceed the longest pause of
// the process (GC, VM migration, SIGSTOP) at the 99th percentile plus the
// renewal latency at the 99th percentile plus SafetyMargin, or the node
// loses its lease to its own pauses; and OutageBound must exceed the longest
// etcd unavailability it should ride out, or the node loses its lease to
// etcd's. A longer TTL delays failover after a crash by as much.
type SessionConfig struct {
	// TTL is the lease's time to live. Zero means DefaultTTL (10s). It must
	// be at least MinTTL (2s). etcd counts TTLs in whole seconds: a TTL that
	// is not a whole number of seconds is rounded up when the lease is
	// granted, and the TTL etcd grants is the one the session uses.
	TTL time.Duration
	// RenewInterval is the time between the send times of successive
	// renewals. Zero means TTL/3, or less where needed so that OutageBound is
	// at least TTL/2 + 100ms (never less than 100ms): 200ms at TTL 2s with
	// the default margin, TTL/3 from TTL 5s on. It must be positive and less
	// than TTL - SafetyMargin, so that a renewal is sent before the safe
	// deadline.
	RenewInterval time.Duration
	// SafetyMargin is subtracted from the lease's expiry as computed by the
	// node to give the safe deadline. It absorbs clock-rate differences
	// between the node and etcd and the time work needs to stop. Zero means
	// max(TTL/10, 500ms). It must be less than TTL.
	SafetyMargin time.Duration
	// Clock is the time source (github.com/jonboulle/clockwork's Clock; a
	// clockwork.FakeClock for virtual time). Nil means the system clock.
	Clock clockwork.Clock
	// Logger receives the session's events, with the field "lease": session
	// opened (Info), session lost (Warn; Info when closed), renewal
	// attempt failed (Debug), renewal margin low (Warn, once per outage,
	// when the time left before the safe deadline falls below half of
	// OutageBound), renewal recovered (Info). Nil discards them.
	Logger hclog.Logger
	// Metrics, if not nil, is the registry the session's metrics are
	// registered with. Sessions opened with one registry share them (a node
	// opens a new session after each loss): counters add up across
	// sessions, and the margin gauge follows the session opened last. To
	// tell the sessions of several nodes in one process apart, wrap the
	// registry with a const label (prometheus.WrapRegistererWith). Nil
	// means no metrics.
	//
	//	tenure_session_renewal_duration_seconds     histogram  send to acknowledgement of each acknowledged renewal
	//	tenure_session_renewals_total               counter    acknowledged renewals
	//	tenure_session_renewal_failures_total       counter    renewal attempts that failed or went unanswered
	//	tenure_session_safe_deadline_margin_seconds gauge      time left before the live session's safe deadline (0 without one)
	//	tenure_session_opened_total                 counter    sessions opened
	//	tenure_session_losses_total{cause}          counter    sessions ended, by cause: expired, revoked, deleted, closed, other
	Metrics prometheus.Registerer
}

// DefaultSessionConfig returns the default configuration: TTL 10s, renewal
// every TTL/3, safety margin 1s, the real clock and no logging.
func DefaultSessionConfig() SessionConfig {
	return SessionConfig{}.withDefaults()
}

func defaultMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, minMargin)
}

// lead is how long before its safe deadline a session with margin ends, so
// that work cancelled on Done has stopped when the deadline passes.
func lead(margin time.Duration) time.Duration {
	return min(margin/4, maxLead)
}

// defaultRenewInterval is TTL/3, shortened so that the outage bound is at
// least ttl/2 + outageSlack where margin leaves room for it.
func defaultRenewInterval(ttl, margin time.Duration) time.Duration {
	fit := ttl/2 - margin - lead(margin) - renewRetryInterval - outageSlack
	return min(ttl/3, max(fit, minDefaultRenewInterval))
}

// outageBound is the longest etcd unavailability a session with these
// parameters survives; see SessionConfig.
func outageBound(ttl, margin, cadence time.Duration) time.Duration {
	return max(0, ttl-margin-lead(margin)-cadence-renewRetryInterval)
}

// withDefaults fills in every zero field. Negative values are kept so that
// Validate can report them.
func (c SessionConfig) withDefaults() SessionConfig {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.SafetyMargin == 0 && c.TTL > 0 {
		c.SafetyMargin = defaultMargin(c.TTL)
	}
	if c.RenewInterval == 0 && c.TTL > 0 {
		c.RenewInterval = defaultRenewInterval(c.TTL, c.SafetyMargin)
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}

// OutageBound returns the longest etcd unavailability that a session with
// this configuration (defaults applied) survives whenever it starts:
//
//	TTL - SafetyMargin - min(SafetyMargin/4, 100ms) - RenewInterval - R
//
// with TTL rounded up to whole seconds, as etcd grants it, and R = 100ms
// the retry interval (see SessionConfig). It is 0 for a configuration that
// Validate refuses, or whose renewal leaves no room for an outage. A
// running session logs its bound, with the TTL etcd granted, when it opens
// (outage_bound).
func (c SessionConfig) OutageBound() time.Duration {
	if c.Validate() != nil {
		return 0
	}
	d := c.withDefaults()
	return outageBound(time.Duration(ttlSeconds(d.TTL))*time.Second, d.SafetyMargin, d.RenewInterval)
}

// Validate reports whether c, with its defaults applied, can configure a
// Session. Errors wrap ErrInvalidConfig and name the values involved.
func (c SessionConfig) Validate() error {
	if err := nilness.TypedNil(nilness.Field{Name: "logger", Value: c.Logger}, nilness.Field{Name: "clock", Value: c.Clock}, nilness.Field{Name: "metrics registerer", Value: c.Metrics}); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	d := c.withDefaults()
	switch {
	case d.TTL < MinTTL:
		return fmt.Errorf("%w: TTL %v must be at least %v", ErrInvalidConfig, d.TTL, MinTTL)
	case d.RenewInterval <= 0:
		return fmt.Errorf("%w: renew interval %v must be positive", ErrInvalidConfig, d.RenewInterval)
	case d.SafetyMargin < 0:
		return fmt.Errorf("%w: safety margin %v must not be negative", ErrInvalidConfig, d.SafetyMargin)
	case d.RenewInterval >= d.TTL:
		return fmt.Errorf("%w: renew interval %v must be < TTL %v", ErrInvalidConfig, d.RenewInterval, d.TTL)
	case d.SafetyMargin >= d.TTL:
		return fmt.Errorf("%w: safety margin %v must be < TTL %v", ErrInvalidConfig, d.SafetyMargin, d.TTL)
	case d.RenewInterval >= d.TTL-d.SafetyMargin:
		return fmt.Errorf("%w: renew interval %v must be < TTL %v - safety margin %v", ErrInvalidConfig, d.RenewInterval, d.TTL, d.SafetyMargin)
	}
	return nil
}
