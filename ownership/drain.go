package ownership

import "time"

// handoff is one batch of partitions handed off together: those that one
// reconciliation stopped admitting work for. Each partition's state
// (draining to deleteWait) names its batch until the partition leaves it:
// its claim deleted (handedOff), or the tenure lost meanwhile. When the
// last one has left, the batch is logged in one line. Only the event loop
// touches it.
type handoff struct {
	reason  Reason
	stopped time.Time     // when its partitions stopped admitting work
	pending int           // partitions still in the batch
	done    []int         // partitions whose claims were deleted
	longest time.Duration // the slowest of them: end of admission to the deletion
}

// flushReleases starts the drains of the tenures released by reconcile.
func (l *loop) flushReleases() {
	if len(l.releaseQ) == 0 {
		return
	}
	n, gen, ts := l.n, l.gen, l.releaseQ
	l.releaseQ, l.handoff = nil, nil
	n.log.Debug("handing off "+partitionCount(len(ts)), "partitions", partitionRanges(partitionsOf(ts)))
	n.spawn(func() { n.drain(gen, ts) })
}

// partitionsOf returns the partitions of ts.
func partitionsOf(ts []*tenure) []int {
	ps := make([]int, len(ts))
	for i, t := range ts {
		ps[i] = t.p
	}
	return ps
}

// handedOff records that p's claim was deleted, ending its handoff in b.
func (l *loop) handedOff(b *handoff, p int) { l.n.ops.handoffDone(b, p) }

// leftHandoff records that p left its handoff batch b (its claim deleted,
// or its tenure lost), and logs the batch once the last partition has
// left.
func (l *loop) leftHandoff(b *handoff) {
	b.pending--
	if b.pending == 0 {
		l.n.ops.handoffEnded(b, leaseString(l.gen))
	}
}

// drain runs on its own goroutine for tenures that are being handed off:
// admitting no work, their contexts still live. It waits for each one's
// in-flight work, within the drain timeout, and then tells the event loop,
// which cancels the tenure's context, queues OnReleased and, once that has
// returned (within what remains of the timeout), deletes the claim.
// Tenures without work in flight go together, so that a large handoff costs
// a few messages and transactions; each busy tenure gets its own goroutine,
// so one long piece of work delays no other partition.
func (n *Node) drain(gen *generation, ts []*tenure) {
	deadline := n.clock.Now().Add(n.cfg.DrainTimeout)
	var ready []*tenure
	for _, t := range ts {
		select {
		case <-t.drained:
			ready = append(ready, t)
		default:
			n.spawn(func() { n.drainOne(gen, t, deadline) })
		}
	}
	if len(ready) > 0 {
		n.post(gen, func(l *loop) { l.drained(ready, deadline, false) })
	}
}

// drainOne is drain for one tenure with work in flight. It gives up if
// the tenure's context is cancelled first: the tenure was lost, and the
// event loop has ended it.
func (n *Node) drainOne(gen *generation, t *tenure, deadline time.Time) {
	timer := n.clock.NewTimer(deadline.Sub(n.clock.Now()))
	defer timer.Stop()
	expired := false
	select {
	case <-t.drained:
	case <-timer.Chan():
		expired = true
		n.log.Warn("drain timeout: cancelling the work still in flight and handing the partition off",
			"partition", t.p, "epoch", t.token.Epoch, "in_flight", t.inflight.Load(), "timeout", n.cfg.DrainTimeout)
	case <-t.ctx.Done():
		return
	}
	n.post(gen, func(l *loop) { l.drained([]*tenure{t}, deadline, expired) })
}

// awaitReleased waits, until deadline, for the OnReleased of the handed-off
// tenures ts to return (ack is closed when the last one has), then tells
// the event loop to delete their claims.
func (n *Node) awaitReleased(gen *generation, ts []*tenure, ack <-chan struct{}, deadline time.Time) {
	timer := n.clock.NewTimer(deadline.Sub(n.clock.Now()))
	defer timer.Stop()
	select {
	case <-ack:
	case <-timer.Chan():
		if len(ts) == 1 {
			n.log.Warn("drain timeout: OnReleased still running", "partition", ts[0].p, "epoch", ts[0].token.Epoch)
		} else {
			n.log.Warn("drain timeout: OnReleased still running", "partitions", len(ts))
		}
	case <-gen.ctx.Done():
		return
	}
	n.post(gen, func(l *loop) { l.released(ts) })
}
