package ownership

import (
	"errors"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Losing partitions without a handoff: a claim that vanished
// (checkTenure) ends its tenure at once, and classify then tells what
// deleted it; a session that ended ends every tenure (loseAll).

// checkAttemptTimeout bounds one check of the lease (Session.Check).
const checkAttemptTimeout = time.Second

// classify tells, once, what removed this node's claims or member key
// while its session looked alive (see loop.vanished and loop.memberGone).
// etcd deletes the keys of a lease when it expires or is revoked, so:
//
//   - if the session has ended (its safe deadline passed: a process
//     resumed after a pause sees the deletions of its expired lease before
//     its own timers fire), they went with the lease: the generation ends
//     with the session's cause;
//   - otherwise the session asks etcd about its lease (Session.Check): a
//     lease etcd no longer has ends the session (expired or revoked) and
//     the keys went with it; a lease that lives means someone else deleted
//     them, a forced release for each claim and, for the member key, the
//     end of the session with election.ErrKeyDeleted.
//
// Until the check answers, the tenures concerned have already ended (their
// contexts were cancelled when their claims vanished); only the account of
// the event waits. A check that cannot be made is tried again, and the
// session's own safe deadline bounds the wait.
func (l *loop) classify() {
	if len(l.vanished) == 0 && !l.memberGone || l.lost != nil {
		return
	}
	if err := l.gen.sess.Err(); err != nil {
		l.lost = err
		return
	}
	if l.checking {
		return
	}
	l.checking = true
	n, gen := l.n, l.gen
	n.spawn(func() {
		ctx, cancel := n.withTimeout(gen.ctx, checkAttemptTimeout)
		err := gen.sess.Check(ctx)
		cancel()
		n.post(gen, leaseChecked{err: err})
	})
}

// checked handles the answer of the lease check that classify started.
func (l *loop) checked(err error) {
	l.checking = false
	switch {
	case errors.Is(err, election.ErrCheckFailed):
		l.checks++
		l.n.log.Debug("check lease", "error", err, "attempt", l.checks)
		l.n.after(l.gen, backoff(l.checks-1), checkRetry{})
		return
	case err != nil: // the session ended: the keys went with its lease
		l.checks = 0
		l.lost = err
		return
	}
	l.checks = 0
	l.n.report.forcedReleases(l.gen, l.vanished)
	l.vanished = nil
	if l.memberGone {
		l.gen.sess.EndKeyDeleted(l.n.layout.Member(l.n.id))
		l.lost = l.gen.sess.Err()
	}
}

// checkTenure ends p's tenure if its claim is gone (deleted by someone
// else, or expired with a lease). The fleet state calls it whenever p's
// claim changes.
func (l *loop) checkTenure(p int) {
	l.dirty = true
	rec := l.rec(p)
	t := rec.t
	if t == nil || l.holds(p, t) {
		return
	}
	switch rec.phase {
	case phaseFencing:
		l.transition(p, &record{phase: phaseAborting, t: t}, reasonLost)
	case phaseFenceWait:
		l.transition(p, idle, reasonLost)
	case phaseStarting, phaseServing, phaseDraining:
		// A loss, even in the middle of a handoff: the work in flight is
		// cancelled at once, the next owner may be serving already. What
		// deleted the claim is told once classify knows.
		l.transition(p, idle, reasonLost)
		l.vanished = append(l.vanished, t)
	}
}

// loseAll ends the generation, whose session ended with err: every tenure
// ends at once with reasonLost, and the loss is logged in one line with
// every tenure it ended (those whose claims vanished first included). The
// claims go with the lease.
func (l *loop) loseAll(err error) {
	l.unwatch()
	l.gen.end(ErrLost)
	ended := l.endAll(reasonLost)
	l.claimsInFlight = 0
	clear(l.groupsInFlight) // their results, of this generation, are dropped
	l.shapeWait, l.shapeRefusals = 0, 0
	l.pendingDeletes, l.pendingFences, l.releaseQ, l.handoff = nil, nil, nil, nil
	clear(l.readyQ)
	l.readyFlying = false
	l.memberDeleting = false
	l.publish()
	l.fireAcquired()
	l.n.report.sessionLost(l.gen, append(l.vanished, ended...), err)
	l.vanished, l.memberGone, l.checking, l.checks = nil, false, false, 0
}

// endAll ends every tenure of this node for reason r at once (a tenure
// already handed off keeps its reason), makes every partition idle and
// returns the served tenures that ended, whose OnReleased is queued.
func (l *loop) endAll(r reason) []*tenure {
	var ended []*tenure
	for p := range l.n.slots.len() {
		rec := l.rec(p)
		l.transition(p, idle, r)
		if rec.served() {
			ended = append(ended, rec.t)
		}
	}
	return ended
}
