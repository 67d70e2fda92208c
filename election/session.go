package election

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Session is a node's one etcd lease, renewed by the session itself every
// RenewInterval, with a safe deadline computed on the node's monotonic clock.
//
// The safe deadline is the send time of the last acknowledged renewal (or of
// the grant) plus the TTL etcd granted, minus SafetyMargin. etcd starts a
// lease's countdown no earlier than it receives the request, which is no
// earlier than the node sent it, so etcd does not expire the lease before
// the safe deadline (etcd restarts countdowns on a leader change, which only
// extends them). The session ends — Done is closed and Err says why — when
// the lease is revoked, when etcd reports it missing, or just before the
// safe deadline passes without a newer acknowledged renewal, whether or not
// etcd can be reached. Work bound to Context stops before the lease can be
// given to anyone else.
//
// A Session is safe for concurrent use.
type Session struct {
	lease  clientv3.Lease
	cfg    SessionConfig
	clock  clockwork.Clock
	log    hclog.Logger
	met    *sessionMetrics // nil: none
	id     clientv3.LeaseID
	ttl    time.Duration // granted by etcd
	margin time.Duration
	lead   time.Duration // the session ends this long before the safe deadline

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // safe deadline
	renewals int64
	failures int64
	streak   int64     // failed attempts since the last acknowledged renewal
	lastSent time.Time // send time of the newest acknowledged renewal (or grant)
	latency  time.Duration
	closed   bool
	ending   bool // end was called

	loopDone chan struct{}
}

// SessionStatus is the state of a session now: its renewal counts, the
// latency of its last renewal and its safe deadline.
type SessionStatus struct {
	// Renewals counts acknowledged renewals.
	Renewals int64
	// Failures counts renewal attempts that failed or timed out.
	Failures int64
	// LastRenewLatency is the round trip of the last acknowledged renewal,
	// from send to acknowledgement.
	LastRenewLatency time.Duration
	// SafeDeadline is the session's safe deadline when the snapshot was taken.
	SafeDeadline time.Time
	// Remaining is SafeDeadline minus the current time: the margin left
	// before the session must end. It is negative once the deadline passed.
	Remaining time.Duration
	// LastRenewal is the send time of the newest acknowledged renewal, or
	// of the grant before the first one.
	LastRenewal time.Time
	// ConsecutiveFailures counts the renewal attempts sent after the last
	// acknowledged renewal that failed or timed out: zero while renewals
	// succeed. An attempt sent before it (attempts overlap while etcd does
	// not answer) that fails afterwards does not count.
	ConsecutiveFailures int64
}

// NewSession grants a lease of cfg.TTL through lease and starts renewing it.
// ctx bounds only the grant; the session then lives until Close or until the
// lease is lost. The safe deadline of the grant counts from the instant
// before the grant was sent.
//
// A *clientv3.Client satisfies clientv3.Lease. NewSession returns an error
// wrapping ErrNilArgument for a nil lease, ErrInvalidConfig for an invalid
// cfg, and ErrMetrics if cfg.Metrics is set and the session metrics cannot
// be registered there.
func NewSession(ctx context.Context, lease clientv3.Lease, cfg SessionConfig) (*Session, error) {
	if nilness.Is(lease) {
		return nil, fmt.Errorf("%w: clientv3.Lease %T", ErrNilArgument, lease)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	clk := cfg.Clock
	met, err := sessionMetricsOf(cfg.Metrics)
	if err != nil {
		return nil, err
	}

	sent := clk.Now()
	resp, err := lease.Grant(ctx, ttlSeconds(cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("election: grant lease of %v: %w", cfg.TTL, err)
	}
	if resp.TTL <= 0 {
		return nil, fmt.Errorf("election: grant lease of %v: etcd granted TTL %ds", cfg.TTL, resp.TTL)
	}
	s := &Session{
		lease:    lease,
		cfg:      cfg,
		clock:    clk,
		id:       resp.ID,
		ttl:      time.Duration(resp.TTL) * time.Second,
		margin:   cfg.SafetyMargin,
		lead:     lead(cfg.SafetyMargin),
		met:      met,
		loopDone: make(chan struct{}),
	}
	s.log = cfg.Logger.With("lease", fmt.Sprintf("%x", int64(s.id)))
	s.deadline = sent.Add(s.ttl - s.margin)
	s.lastSent = sent
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	if s.untilEnd(clk.Now()) <= 0 {
		s.cancel(ErrSessionExpired)
		close(s.loopDone)
		_, _ = lease.Revoke(ctx, s.id)
		return nil, fmt.Errorf("election: grant lease: %w: the grant took longer than TTL %v - margin %v", ErrSessionExpired, s.ttl, s.margin)
	}
	s.met.sessionOpened(s)
	s.log.Info("session opened", "ttl", s.ttl, "renew_interval", cfg.RenewInterval, "margin", s.margin, "outage_bound", s.grantedOutageBound())
	go s.run(sent)
	return s, nil
}

// ttlSeconds converts d to etcd's whole seconds, rounding up.
func ttlSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// Lease returns the session's lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.id }

// TTL returns the lease TTL etcd granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done returns a channel that is closed when the session ends, for any
// reason. Err then says why.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while the session is alive. Once Done is closed it
// returns an error wrapping ErrSessionExpired (the safe deadline was reached
// without an acknowledged renewal, or etcd reported the lease missing after
// it: the lease expired), ErrLeaseLost (etcd reported the lease missing
// before the safe deadline: it was revoked), ErrKeyDeleted (EndKeyDeleted
// was called) or ErrSessionClosed (Close was called). All wrap
// ErrSessionDone; LossCause names them.
//
// Err reads the clock: once the safe deadline has passed it ends the
// session on the spot, even if the goroutine that watches the deadline has
// not run yet (a process resumed after a pause runs its own code first).
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		if s.untilEnd(s.clock.Now()) > 0 {
			return nil
		}
		s.expire()
	}
	return context.Cause(s.ctx)
}

// expire ends the session because its safe deadline passed.
func (s *Session) expire() {
	s.end(fmt.Errorf("%w: lease %x: no renewal acknowledged within TTL %v - margin %v of its sending", ErrSessionExpired, int64(s.id), s.ttl, s.margin))
}

// Context returns a context that is cancelled when the session ends, with
// Err as its cause (context.Cause).
func (s *Session) Context() context.Context { return s.ctx }

// safeDeadline returns the send time of the last acknowledged renewal (or
// of the grant) plus the granted TTL minus the safety margin, on the
// session's clock (SessionStatus.SafeDeadline). Work that depends on the
// lease must have stopped by then. The session ends slightly before it (by
// min(margin/4, 100ms)), so that work cancelled on Done has stopped when
// the deadline passes.
func (s *Session) safeDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// grantedOutageBound returns the longest etcd unavailability this session
// survives whenever it starts: SessionConfig.OutageBound with the TTL etcd
// granted.
func (s *Session) grantedOutageBound() time.Duration {
	return outageBound(s.ttl, s.margin, s.cfg.RenewInterval)
}

// Status returns the state of the session now.
func (s *Session) Status() SessionStatus {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionStatus{
		Renewals:            s.renewals,
		Failures:            s.failures,
		LastRenewLatency:    s.latency,
		SafeDeadline:        s.deadline,
		Remaining:           s.deadline.Sub(now),
		LastRenewal:         s.lastSent,
		ConsecutiveFailures: s.streak,
	}
}

// Close ends the session with ErrSessionClosed (unless it had already
// ended), stops renewing and revokes the lease, which deletes every key
// bound to it. It returns the revoke's error, if any; a lease that etcd no
// longer has is not an error. Close is idempotent: later calls return nil.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.end(ErrSessionClosed)
	<-s.loopDone
	if _, err := s.lease.Revoke(ctx, s.id); err != nil && !etcderr.LeaseNotFound(err) {
		return fmt.Errorf("election: revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}

// end ends the session with cause, unless it already ended. The loss is
// counted before Done is closed, so that whoever sees Done sees it counted;
// it is logged after, so that no logger delays the end.
func (s *Session) end(cause error) {
	s.mu.Lock()
	if s.ending {
		s.mu.Unlock()
		return
	}
	s.ending = true
	s.mu.Unlock()
	s.met.sessionEnded(s, cause)
	s.cancel(cause)
	kind := LossCause(cause)
	if kind == lossClosed {
		s.log.Info("session closed", "cause", kind)
		return
	}
	s.log.Warn("session lost", "cause", kind, "error", cause, "remaining", s.Status().Remaining)
}

// missing ends the session because etcd reported the lease missing: as
// expired if the safe deadline has passed (etcd expired it: the node could
// not renew it in time, a pause say), else as lost (someone revoked it).
// etcd does not record why a lease went, and it never expires one before
// the safe deadline, so the deadline tells the two apart.
func (s *Session) missing(detail error) {
	if s.untilEnd(s.clock.Now()) <= 0 {
		s.expire()
		return
	}
	s.end(fmt.Errorf("%w: lease %x: %v", ErrLeaseLost, int64(s.id), detail))
}

// Check asks etcd whether the session's lease still exists
// (LeaseTimeToLive) and returns Err afterwards. If etcd reports the lease
// missing, the session ends, with ErrSessionExpired if its safe deadline
// has passed and ErrLeaseLost if not. If etcd cannot be asked, Check
// returns an error that wraps ErrCheckFailed and the call's, and the session
// stays as it was (it still ends at its safe deadline).
//
// A user of the session calls it when keys it bound to the lease disappear
// while the session looks alive: with the lease gone they went with it (a
// session loss), with the lease alive someone else deleted them.
func (s *Session) Check(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	resp, err := s.lease.TimeToLive(ctx, s.id)
	switch {
	case err != nil && !etcderr.LeaseNotFound(err):
		if serr := s.Err(); serr != nil {
			return serr
		}
		return fmt.Errorf("%w: lease %x: %w", ErrCheckFailed, int64(s.id), err)
	case err != nil:
		s.missing(err)
	case resp.TTL < 0:
		s.missing(errors.New("etcd reports no such lease"))
	}
	return s.Err()
}

// EndKeyDeleted ends the session with an error wrapping ErrKeyDeleted (and
// ErrSessionDone) and naming key, unless it has already ended; it does not
// revoke the lease (Close does). The session's owner calls it when it finds
// a key it bound to the lease deleted or replaced by someone else while the
// lease lives (Check returned nil): the work bound to the session must
// stop, and the loss is counted under the cause "deleted".
func (s *Session) EndKeyDeleted(key string) {
	s.end(fmt.Errorf("%w: lease %x: %s deleted or replaced by someone else while the lease lived", errBoundKeyDeleted, int64(s.id), key))
}

// untilEnd returns how long from now the session may still run: up to the
// safe deadline minus the lead.
func (s *Session) untilEnd(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline.Add(-s.lead).Sub(now)
}
