package election

import (
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
)

// renewal is the outcome of one renewal attempt.
type renewal struct {
	sent, acked time.Time
	ttl         time.Duration
	err         error
}

// run is the renewal loop. sent is the send time of the grant.
//
// A renewal falls due RenewInterval after the send time of the newest
// acknowledged one. While it is due, the loop sends an attempt at once and
// another every renewRetryInterval, whether the earlier attempts failed or
// are still unanswered, so that neither a failing request nor a member that
// never answers holds the session. Attempts overlap; each is given up after
// renewAttemptTimeout, and none runs past the safe deadline. Every
// acknowledgement moves the safe deadline if its send time is newer; the
// renewal stops being due once an attempt sent less than RenewInterval ago
// is acknowledged (an answer to an attempt sent long ago, held up in the
// network, does not stop the retries). Every retry first asks the etcd
// client to reconnect at once if it is waiting to (etcderr.Redial), so
// that an etcd member restarted within OutageBound is reached in time.
func (s *Session) run(sent time.Time) {
	defer close(s.loopDone)
	cadence := s.cfg.RenewInterval

	expiry := s.clock.NewTimer(s.untilEnd(s.clock.Now()))
	next := s.clock.NewTimer(sent.Add(cadence).Sub(s.clock.Now()))
	results := make(chan renewal)
	inflight := 0
	warned := false // the low-margin warning of the current outage was logged
	warnBelow := s.grantedOutageBound() / 2
	if warnBelow <= 0 {
		warnBelow = (s.ttl - s.margin) / 2
	}
	last := sent // send time of the newest acknowledged renewal
	due := false
	defer func() {
		expiry.Stop()
		next.Stop()
		for ; inflight > 0; inflight-- { // their contexts are children of s.ctx, cancelled by now
			<-results
		}
	}()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-expiry.Chan():
			if d := s.untilEnd(s.clock.Now()); d > 0 {
				expiry.Reset(d)
				continue
			}
			s.expire()
			return
		case <-next.Chan():
			if due {
				// A retry: the connection may be waiting out gRPC's
				// reconnect backoff, which can outlast the session.
				etcderr.Redial(s.lease)
			}
			due = true
			// Never wait for an answer past the safe deadline.
			if timeout := min(renewAttemptTimeout, s.untilEnd(s.clock.Now())+s.lead); timeout > 0 {
				inflight++
				go func() { results <- s.renew(timeout) }()
			}
			next.Reset(renewRetryInterval)
		case r := <-results:
			inflight--
			if r.err != nil {
				if etcderr.LeaseNotFound(r.err) {
					s.missing(r.err)
					return
				}
				if s.ctx.Err() != nil {
					return
				}
				s.mu.Lock()
				s.failures++
				if r.sent.After(s.lastSent) {
					s.streak++ // else it was overtaken by an acknowledged renewal
				}
				streak := s.streak
				s.mu.Unlock()
				s.met.renewFailed()
				now := s.clock.Now()
				remaining := s.safeDeadline().Sub(now)
				s.log.Debug("renewal attempt failed; retrying within "+renewRetryInterval.String(),
					"error", r.err, "latency", now.Sub(r.sent), "remaining", remaining, "failures", streak)
				if !warned && remaining < warnBelow {
					warned = true
					s.log.Warn("renewal failing: safe deadline margin low",
						"error", r.err, "latency", now.Sub(r.sent), "remaining", remaining, "failures", streak,
						"outage_bound", s.grantedOutageBound())
				}
				continue
			}
			streak := s.acknowledge(r)
			s.met.renewed(r)
			if warned {
				warned = false
				s.log.Info("renewal recovered", "latency", r.acked.Sub(r.sent), "failures", streak,
					"remaining", s.safeDeadline().Sub(r.acked))
			}
			if r.sent.After(last) {
				last = r.sent
			}
			now := s.clock.Now()
			expiry.Reset(s.untilEnd(now))
			if wait := last.Add(cadence).Sub(now); wait > 0 || !due {
				due = false
				resetTimer(next, wait)
			}
		}
	}
}

// acknowledge records an acknowledged renewal and returns the number of
// failed attempts before it.
func (s *Session) acknowledge(r renewal) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := r.sent.Add(r.ttl - s.margin); d.After(s.deadline) {
		s.deadline = d
	}
	if r.sent.After(s.lastSent) {
		s.lastSent = r.sent
	}
	s.renewals++
	s.latency = r.acked.Sub(r.sent)
	streak := s.streak
	s.streak = 0
	return streak
}

// timer is the part of a clock's timer that resetTimer needs.
type timer interface {
	Chan() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// resetTimer stops t, drops a tick it may have delivered but not yet been
// read, and resets it to d.
func resetTimer(t timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.Chan():
		default:
		}
	}
	t.Reset(d)
}

// renew sends one renewal attempt, bounded by timeout, and reports its send
// time.
func (s *Session) renew(timeout time.Duration) renewal {
	ctx, cancel := clock.WithTimeout(s.ctx, s.clock, timeout)
	defer cancel()
	sent := s.clock.Now()
	resp, err := s.lease.KeepAliveOnce(ctx, s.id)
	acked := s.clock.Now()
	if err != nil {
		return renewal{sent: sent, acked: acked, err: err}
	}
	if resp.TTL <= 0 {
		return renewal{sent: sent, acked: acked, err: rpctypes.ErrLeaseNotFound}
	}
	return renewal{sent: sent, acked: acked, ttl: time.Duration(resp.TTL) * time.Second}
}
