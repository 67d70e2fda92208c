package ownership

import (
	"errors"
	"time"

	"github.com/tenure-go/tenure/election"
)

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
//     end of the session with election.ErrKeyRemoved.
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
		n.post(gen, func(l *loop) { l.checked(err) })
	})
}

// checked handles the answer of the lease check that classify started.
func (l *loop) checked(err error) {
	l.checking = false
	switch {
	case errors.Is(err, election.ErrCheckFailed):
		l.checks++
		l.n.log.Debug("check lease", "error", err, "attempt", l.checks)
		l.n.after(l.gen, backoff(l.checks-1), func(l *loop) { l.classify() })
		return
	case err != nil: // the session ended: the keys went with its lease
		l.checks = 0
		l.lost = err
		return
	}
	l.checks = 0
	l.n.ops.forcedReleases(l.gen, l.vanished)
	l.vanished = nil
	if l.memberGone {
		l.gen.sess.EndKeyRemoved(l.n.layout.Member(l.n.id))
		l.lost = l.gen.sess.Err()
	}
}
