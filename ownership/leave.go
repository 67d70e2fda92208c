package ownership

import (
	"context"
	"fmt"
	"time"
)

// Leaving the cluster (Close): startClose deletes the member key, so that
// every node's ring moves this node's partitions away, and reconcile hands
// each one off as in a move (release.go); closeDone tells when all are
// handed off, and finishClose revokes the lease. If Close's context ends
// first, abort ends what remains at once.

// startClose begins a graceful leave: delete the member key, so that every
// node's ring (this one's too) moves this node's partitions away, and hand
// every partition off.
func (l *loop) startClose() {
	l.closing = true
	l.dirty = true
	l.memberDeleting = true
	n, gen := l.n, l.gen
	n.spawn(func() { n.runUnregister(gen) })
}

// runUnregister deletes the member key of gen and posts the result.
func (n *Node) runUnregister(gen *generation) {
	ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
	defer cancel()
	n.post(gen, memberDeleted{err: n.unregisterTxn(ctx, gen.memberRev, n.handoffPut(gen))})
}

// closeDone reports whether a graceful leave has handed everything off.
func (l *loop) closeDone() bool {
	if l.memberDeleting || l.claimsInFlight > 0 {
		return false
	}
	for p := range l.n.slots.len() {
		if l.rec(p).phase != phaseIdle {
			return false
		}
	}
	return true
}

// finishClose revokes the lease and publishes the final snapshot.
func (l *loop) finishClose() error {
	l.unwatch()
	err := l.gen.sess.Close(l.n.rootCtx)
	l.gen.end(ErrClosed)
	l.publishClosed()
	if err != nil {
		return fmt.Errorf("ownership: close %s: %w", l.n.id, err)
	}
	l.n.log.Info("left the cluster")
	return nil
}

// abort stops at once (Close's context ended): every tenure ends with
// reasonClosed, and the lease is left to expire (or revoked if etcd answers
// at once). If etcd refused puts meanwhile (the NOSPACE alarm), the
// returned error says that the partitions kept went with the lease.
func (l *loop) abort() error {
	kept := len(l.keptAway())
	full := l.w.full
	l.unwatch()
	ended := l.endAll(reasonClosed)
	l.gen.end(ErrClosed)
	l.publishClosed()
	l.fireAcquired()
	l.n.report.closeAborted(l.gen, ended)
	// Revoke the lease if etcd answers at once; otherwise it expires.
	ctx, cancel := l.n.withTimeout(context.Background(), 100*time.Millisecond)
	_ = l.gen.sess.Close(ctx)
	cancel()
	if full && kept > 0 {
		l.n.log.Warn("etcd database full (NOSPACE alarm): Close's context ended; "+partitionCount(kept)+" go with the lease, as in a crash",
			"lease", leaseString(l.gen))
		return l.closeErrNoSpace(kept)
	}
	return nil
}
