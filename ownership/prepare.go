package ownership

import (
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
)

// Preparing a partition (the successor's side of a warm handoff): when the
// ring gives this node a partition that another node still holds,
// reconcile starts a preparation (startPrepare: idle -> preparing), whose
// OnPrepare runs on a goroutine of its own (runPrepare); once it has
// returned (prepared: -> ready), the node puts its readiness key,
// ready/<p>/<node> = the holder's epoch, under its lease (flushReady). The
// holder (warm.go) sees it and hands off; when its claim is gone, this
// node claims as usual (launchClaims ends the preparation), and the
// tenure remembers whether it was prepared (Event.Prepared). If the ring
// moves the partition elsewhere, or another claim takes the holder's
// place, the move is called off (callOff: -> idle). The node holds no
// token for the partition during all of it: a preparation reads. A holder
// that hands its claim over deletes the readiness key in the same
// transaction (deleteTxn); otherwise this node deletes it as its claim
// begins, or as the move is called off (endPrepare, callOff).

// preparation is one preparation of a partition by this node. Its fields
// other than ctx are the event loop's.
type preparation struct {
	holder   string // the node that holds the partition
	epoch    int64  // the epoch of the holder's claim
	count    int    // the partition count p counts by (Event.Partitions)
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when runPrepare has returned
	prepared time.Time     // ready: when OnPrepare returned nil; zero if it failed, or ran too late
}

// warmEnabled reports whether planned moves have a prepare phase.
func (n *Node) warmEnabled() bool { return n.cfg.WarmTimeout > 0 }

// prepares reports whether this node prepares the partitions planned moves
// give it: it has an OnPrepare and the prepare phase is on. It says so in
// its member value, so that a holder waits for its readiness, and for
// that of no node that does not prepare (one without OnPrepare, or of a
// build without a prepare phase), which hands off at once.
func (n *Node) prepares() bool { return n.warmEnabled() && n.cfg.Callbacks.OnPrepare != nil }

// startPrepare starts preparing p, which c's holder serves and the ring
// gives this node.
func (l *loop) startPrepare(p int, c fleetview.Claim) {
	n, gen := l.n, l.gen
	pr := &preparation{holder: c.Owner, epoch: c.Epoch, count: l.fleet.Shape.Count(p), done: make(chan struct{})}
	pr.ctx, pr.cancel = context.WithCancelCause(gen.ctx)
	prev := l.prepRunning[p] // one OnPrepare per partition at a time
	l.prepRunning[p] = pr
	l.transition(p, &record{phase: phasePreparing, prep: pr}, 0)
	n.spawn(func() { n.runPrepare(gen, p, pr, prev) })
}

// runPrepare runs OnPrepare for p, once the one before it (prev) has
// returned, and tells the event loop.
func (n *Node) runPrepare(gen *generation, p int, pr *preparation, prev *preparation) {
	defer close(pr.done)
	if prev != nil {
		select {
		case <-prev.done:
		case <-pr.ctx.Done():
			return
		}
	}
	var err error
	if f := n.cfg.Callbacks.OnPrepare; f != nil && pr.ctx.Err() == nil {
		err = f(Event{Kind: EventPrepare, Partition: p, Partitions: pr.count, Holder: pr.holder, Context: pr.ctx})
	}
	n.post(gen, prepareDone{p: p, prep: pr, err: err, at: n.clock.Now()})
}

// prepared handles the return of OnPrepare: the partition is ready (or its
// preparation failed, which the holder need not wait for either), and
// its readiness is put.
func (l *loop) prepared(m prepareDone) {
	if l.prepRunning[m.p] == m.prep {
		delete(l.prepRunning, m.p)
	}
	rec := l.rec(m.p)
	if rec.phase != phasePreparing || rec.prep != m.prep {
		return // over already
	}
	switch {
	case m.err != nil:
		l.n.log.Warn("prepare failed; the move goes on cold", "partition", m.p, "holder", m.prep.holder, "error", m.err)
	case l.n.cfg.Callbacks.OnPrepare != nil:
		m.prep.prepared = m.at
	}
	l.transition(m.p, &record{phase: phaseReady, prep: m.prep}, 0)
	l.readyQ[m.p] = m.prep.epoch
}

// reconcilePrepare moves p, which this node prepares (rec), on: adopted
// if the holder handed its claim over to this node (handover.go), called
// off if the ring gives it to another node or another claim took the
// place of the holder's, claimed once the holder's claim is gone
// (reported true).
func (l *loop) reconcilePrepare(p int, rec *record, canClaim bool) (claim bool) {
	c := l.fleet.Claims[p]
	switch {
	case c.Epoch != 0 && c.Owner == l.n.id && c.Lease == l.gen.lease && l.mine(p):
		l.adopt(p, c.Epoch, l.endPrepare(p, rec, true), l.fleet.Shape)
	case c.Epoch != 0 && c.Owner == l.n.id && c.Lease == l.gen.lease && !l.closing && !l.graceOver(p, c.Epoch):
		// Handed over before this node's view gives it p: kept prepared.
	case l.closing:
		l.callOff(p, rec, ErrClosed)
	case !l.mine(p) || l.resyncing || c.Epoch != 0 && c.Epoch != rec.prep.epoch:
		l.callOff(p, rec, ErrMoveCalledOff)
	case c.Epoch == 0 && canClaim:
		return true
	}
	return false
}

// callOff ends the preparation of p (rec) for cause: the partition is not
// claimed after it.
func (l *loop) callOff(p int, rec *record, cause error) {
	rec.prep.cancel(cause)
	if rec.phase == phaseReady {
		l.readyQ[p] = 0
	}
	l.transition(p, idle, 0)
}

// endPrepare ends the preparation of p (rec) as its claim begins, and
// returns when it was prepared (zero if it was not). The readiness key
// goes: the holder's hand-over transaction deleted it if the claim was
// handed over (handedOver), and this node deletes it otherwise. A
// readiness put still on its way when the claim was handed over may land
// after that deletion; the key left names an epoch below every claim of
// p to come, which no holder waits for, until this node prepares p again
// or its lease ends.
func (l *loop) endPrepare(p int, rec *record, handedOver bool) time.Time {
	rec.prep.cancel(ErrMoveCompleted)
	if rec.phase != phaseReady {
		return time.Time{}
	}
	if !handedOver {
		l.readyQ[p] = 0
	}
	return rec.prep.prepared
}

// flushReady writes the queued readiness keys (readyQ), under this node's
// lease, in one transaction per batch, unless a write of them is in
// flight: then they wait for it (readyWritten), so that the preparations
// that end while one write is in flight cost one write together, and the
// writes of one key land in the order the loop made them. Of the writes
// queued to one key, only the last is made. Both puts and deletions are
// best effort: a readiness that does not reach etcd costs the holder its
// warm timeout, and a key left behind names an epoch that no claim has
// any more, and goes with the lease.
func (l *loop) flushReady() {
	if l.readyFlying || len(l.readyQ) == 0 {
		return
	}
	n, gen := l.n, l.gen
	ops := make([]clientv3.Op, 0, len(l.readyQ))
	for p, epoch := range l.readyQ {
		k := n.layout.Ready(p, n.id)
		if epoch == 0 {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, strconv.FormatInt(epoch, 10), clientv3.WithLease(gen.lease)))
		}
	}
	clear(l.readyQ)
	l.readyFlying = true
	size := l.batch
	n.spawn(func() {
		defer n.post(gen, readyWritten{})
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		defer cancel()
		for len(ops) > 0 {
			batch := ops[:min(len(ops), size)]
			ops = ops[len(batch):]
			if _, err := n.cli.Txn(ctx).Then(batch...).Commit(); err != nil && gen.ctx.Err() == nil {
				n.log.Warn("write readiness of prepared partitions; their holders wait for the warm timeout", "error", err, "keys", len(batch))
			}
		}
	})
}
