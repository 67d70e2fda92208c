package ownership

import (
	"time"
)

// message is what the node's goroutines hand the event loop: the result of
// a transaction, a drain or a check, or a timer that fired. Each kind is a
// named type whose deliver calls the loop's step for it, so that a stack
// trace names the flow.
type message interface{ deliver(l *loop) }

// envelope is a message tagged with the generation (session) it belongs
// to: the loop drops the messages of a generation that has ended.
type envelope struct {
	gen uint64
	m   message
}

func (l *loop) handle(e envelope) {
	if e.gen == l.gen.id {
		e.m.deliver(l)
	}
}

// post hands m to the event loop, unless gen has ended or the loop has
// returned.
func (n *Node) post(gen *generation, m message) {
	select {
	case n.msgs <- envelope{gen: gen.id, m: m}:
	case <-gen.ctx.Done():
	case <-n.loopDone:
	}
}

// after posts m d from now, unless gen ends first.
func (n *Node) after(gen *generation, d time.Duration, m message) {
	n.spawn(func() { n.postAfter(gen, d, m) })
}

func (n *Node) postAfter(gen *generation, d time.Duration, m message) {
	t := n.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		n.post(gen, m)
	case <-gen.ctx.Done():
	}
}

// spawn runs f on a goroutine that Close waits for.
func (n *Node) spawn(f func()) { n.wg.Go(f) }

// The messages, in the order of a partition's lifecycle.

// prepareDone says that OnPrepare for p returned err at at: the
// partition is prepared (prepare.go).
type prepareDone struct {
	p    int
	prep *preparation
	err  error
	at   time.Time
}

func (m prepareDone) deliver(l *loop) { l.prepared(m) }

// claimDone is the result of a claim transaction (acquire.go).
type claimDone struct {
	batch []int
	w     claimWrite
	rev   int64
	out   []outcome
	err   error
}

func (m claimDone) deliver(l *loop) { l.claimed(m) }

// claimHoldOver ends the backoff after a failed claim transaction.
type claimHoldOver struct{}

func (claimHoldOver) deliver(l *loop) { l.resumeClaims() }

// fenceDone is the result of advancing the fencers of ts (fencing.go).
type fenceDone struct {
	ts   []*tenure
	errs []error
}

func (m fenceDone) deliver(l *loop) {
	var rewinds []*RewindError
	for i, t := range m.ts {
		if rw := l.fenced(t, m.errs[i]); rw != nil {
			rewinds = append(rewinds, rw)
		}
	}
	l.n.report.rewindsFound(rewinds)
}

// fenceRetry ends the backoff of wait, a record in fenceWait.
type fenceRetry struct {
	p    int
	wait *record
}

func (m fenceRetry) deliver(l *loop) { l.retryFence(m.p, m.wait) }

// acquiredReturned says that the OnAcquired of t, a tenure in the
// starting phase, has returned (starting.go).
type acquiredReturned struct{ t *tenure }

func (m acquiredReturned) deliver(l *loop) { l.admit([]*tenure{m.t}) }

// acquiredTimeout ends the wait of the tenures ts, in the starting phase
// if their OnAcquired has not returned, after Config.AcquiredTimeout.
type acquiredTimeout struct{ ts []*tenure }

func (m acquiredTimeout) deliver(l *loop) { l.admit(m.ts) }

// drainDone says that the tenures ts have drained, or that the drain
// timeout expired (release.go).
type drainDone struct {
	ts       []*tenure
	deadline time.Time
	expired  bool
}

func (m drainDone) deliver(l *loop) { l.drained(m.ts, m.deadline, m.expired) }

// releasedAck says that the OnReleased of the handed-off tenures ts has
// returned, or that the drain timeout expired.
type releasedAck struct{ ts []*tenure }

func (m releasedAck) deliver(l *loop) { l.released(m.ts) }

// deleteDone is the result of a delete transaction of the partitions of
// batch, which had the records recs when it started (delete.go).
type deleteDone struct {
	batch []int
	recs  []*record
	to    []successor // by partition: the successor its claim was handed over to; zero: deleted
	since time.Time   // the claims' since, for those handed over
	rev   int64
	out   []outcome
	err   error
}

func (m deleteDone) deliver(l *loop) { l.deleted(m) }

// deleteRetry ends the backoff of wait, a record in deleteWait.
type deleteRetry struct {
	p    int
	wait *record
}

func (m deleteRetry) deliver(l *loop) { l.retryDelete(m.p, m.wait) }

// leaseChecked is the answer of the check of the lease that classify
// started (loss.go).
type leaseChecked struct{ err error }

func (m leaseChecked) deliver(l *loop) { l.checked(m.err) }

// checkRetry ends the backoff after a check of the lease that could not be
// made.
type checkRetry struct{}

func (checkRetry) deliver(l *loop) { l.classify() }

// memberDeleted is the result of the deletion of the member key that a
// graceful leave started (leave.go).
type memberDeleted struct{ err error }

func (m memberDeleted) deliver(l *loop) { l.memberDeleted(m.err) }

// The readiness of successors and the warm timeout (warm.go).

// readyListed replaces the loop's view of the readiness keys.
type readyListed struct{ all map[readyKey]int64 }

func (m readyListed) deliver(l *loop) {
	l.ready = m.all
	l.dirty = true
}

// readyChanged updates the loop's view of the readiness keys: an epoch of
// 0 is a deletion.
type readyChanged struct{ set map[readyKey]int64 }

func (m readyChanged) deliver(l *loop) {
	for k, epoch := range m.set {
		if epoch == 0 {
			delete(l.ready, k)
		} else {
			l.ready[k] = epoch
		}
	}
	l.dirty = true
}

// readyWritten says that the write of readiness keys that flushReady
// started is over (prepare.go): the next may go.
type readyWritten struct{}

func (readyWritten) deliver(l *loop) { l.readyFlying = false }

// warmExpired ends the warm timeout of the moves m started.
type warmExpired struct{ m *move }

func (m warmExpired) deliver(l *loop) { l.warmExpired(m.m) }
