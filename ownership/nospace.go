package ownership

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// When etcd cannot create keys (its NOSPACE alarm: it takes reads,
// deletions and lease renewals, but no put), a claim deleted in a planned
// move could not be created again by the successor, and the partition
// would go unowned until the alarm is disarmed. So no planned release
// stops admitting work before a write check (a put of the node's handoff
// key, keys.Layout.Handoff) made after the release was decided has
// succeeded: while etcd refuses it, the node keeps serving the partitions
// the ring moved away, says so, and checks again every writeCheckInterval.
// The transactions that delete a claim or the member key carry the same
// put, so that etcd refuses the deletion whenever it refuses puts: an alarm
// raised between the check and the deletion leaves the claim in place
// (the partition stays owned; it serves again once the alarm is disarmed
// and the handoff completes). A graceful leave deletes its member key
// first, in such a transaction, and hands nothing off until it has: the
// deletion is its write check.
//
// A node learns of the alarm from its own writes only (tenure_etcd_alarm):
// it does not poll etcd's alarm list, which etcd answers through raft (one
// proposal per call, from every node that polled), and which would change
// nothing it does: its releases wait for its own write check.

// writeCheckInterval is how often a node whose planned releases wait for
// etcd to take puts checks again: how long, at most, after the alarm is
// disarmed, they resume.
const writeCheckInterval = 500 * time.Millisecond

// writes is the event loop's state of etcd's willingness to take puts.
type writes struct {
	ok       bool      // a write check succeeded since the last releases were decided
	used     bool      // releases went ahead on ok in this reconciliation
	checking bool      // a write check is in flight, or waits to be retried
	kept     int       // planned releases held back in this reconciliation
	full     bool      // the last write was refused with NOSPACE
	since    time.Time // full: when the first refusal was seen
	said     bool      // full: the wait was logged
}

// mayRelease reports whether a partition this node serves may stop
// admitting work now, for a planned release; if not, it is kept serving
// and a write check is due (flushWriteCheck). During a graceful leave,
// nothing is released before the member key is deleted.
func (l *loop) mayRelease() bool {
	switch {
	case l.closing && !l.unregistered:
		l.w.kept++
		return false
	case l.w.ok:
		l.w.used = true
		return true
	}
	l.w.kept++
	return false
}

// flushWriteCheck ends a reconciliation's use of the write check: a check
// that released partitions is spent, and one is started if partitions
// were kept for want of it.
func (l *loop) flushWriteCheck() {
	if l.w.used {
		l.w.ok, l.w.used = false, false
	}
	kept := l.w.kept
	l.w.kept = 0
	if kept == 0 || l.w.checking || (l.closing && !l.unregistered) {
		return
	}
	l.w.checking = true
	n, gen := l.n, l.gen
	n.spawn(func() { n.runWriteCheck(gen) })
}

// runWriteCheck puts the node's handoff key and posts the result.
func (n *Node) runWriteCheck(gen *generation) {
	ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
	defer cancel()
	_, err := n.cli.Txn(ctx).Then(n.handoffPut(gen)).Commit()
	n.post(gen, writeChecked{err: err})
}

// handoffPut is the put of the node's handoff key that every write check
// and every deletion of a claim or of the member key carries.
func (n *Node) handoffPut(gen *generation) clientv3.Op {
	return clientv3.OpPut(n.layout.Handoff(n.id), "", clientv3.WithLease(gen.lease))
}

// writeChecked handles the result of a write check: partitions kept for
// it are released in the next reconciliation, or checked again after
// writeCheckInterval.
func (l *loop) writeChecked(err error) {
	l.wrote(err)
	if err == nil {
		l.w.checking = false
		l.w.ok = true
		return
	}
	l.n.after(l.gen, writeCheckInterval, writeRetry{})
}

// wrote records the outcome of a write of the event loop: a NOSPACE
// refusal starts a wait (the metric, and the log line once), a success
// ends it.
func (l *loop) wrote(err error) {
	switch {
	case err == nil && l.w.full:
		l.w.full, l.w.said = false, false
		l.n.report.m.alarm(false)
		l.n.log.Info("etcd takes writes again: the planned releases that waited go on", "waited", l.n.clock.Now().Sub(l.w.since))
	case err != nil && etcderr.NoSpace(err):
		if !l.w.full {
			l.w.full, l.w.since = true, l.n.clock.Now()
			l.n.report.m.alarm(true)
		}
		if kept := l.keptAway(); !l.w.said && len(kept) > 0 {
			l.w.said = true
			l.n.log.Warn("etcd database full (NOSPACE alarm): keeping "+partitionCount(len(kept))+" until it is disarmed",
				"partitions", partitionRanges(kept), "lease", leaseString(l.gen))
		}
	}
}

// keptAway returns the partitions this node holds a claim on although the
// ring moved them away (or the node closes): those whose planned release
// waits.
func (l *loop) keptAway() []int {
	var ps []int
	for p := range l.n.slots.len() {
		rec := l.rec(p)
		if (rec.acquired() || rec.releasing()) && !l.mine(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// closeErrNoSpace is the error of a Close whose context ended while etcd
// refused puts: its partitions go with its lease, as in a crash.
func (l *loop) closeErrNoSpace(kept int) error {
	return fmt.Errorf("ownership: close %s: %w: %s not handed off; they go with the lease, as in a crash",
		l.n.id, fleet.ErrNoSpace, partitionCount(kept))
}

// memberDeleted handles the result of a graceful leave's deletion of the
// member key (or of its finding the key no longer this generation's): the
// handoffs start, or the deletion is retried after writeCheckInterval.
func (l *loop) memberDeleted(err error) {
	l.wrote(err)
	if err == nil {
		l.memberDeleting = false
		l.unregistered = true
		l.w.ok = true
		return
	}
	if !etcderr.NoSpace(err) {
		l.n.log.Warn("delete member key; retrying", "error", err)
	}
	n, gen := l.n, l.gen
	n.spawn(func() {
		if n.sleep(gen.ctx, writeCheckInterval) {
			n.runUnregister(gen)
		}
	})
}

// writeRetry asks for another write check.
type writeRetry struct{}

func (writeRetry) deliver(l *loop) { l.w.checking = false }

// loadWritten is the result of a put of the node's load report.
type loadWritten struct{ err error }

func (m loadWritten) deliver(l *loop) { l.wrote(m.err) }

// writeChecked is the result of a write check.
type writeChecked struct{ err error }

func (m writeChecked) deliver(l *loop) { l.writeChecked(m.err) }
