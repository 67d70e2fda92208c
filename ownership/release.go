package ownership

import "time"

// Handing a partition off (a planned release: the ring moved it, or a
// graceful Close): release stops admitting work (serving -> draining); the
// drain, on goroutines of its own, waits for the work in flight; drained
// cancels the tenure's context and queues OnReleased (-> releasing);
// released, once OnReleased has returned, deletes the claim (delete.go).

// handoff is one batch of partitions handed off together: those whose
// moves one reconciliation started (their prepare phase, warm.go), or,
// without a prepare phase, that one reconciliation stopped admitting work
// for. Each partition's record (serving with its move, then draining to
// deleteWait) names its batch until the partition leaves it:
// its claim deleted (report.handoffDone), or the tenure lost meanwhile. When the
// last one has left, the batch is logged in one line. Only the event loop
// touches it.
type handoff struct {
	reason  reason            // why its tenures end: reasonMoved or reasonClosed
	stopped map[int]time.Time // by partition: when it stopped admitting work
	pending int               // partitions still in the batch
	done    []int             // partitions whose claims were deleted or handed over
	handed  int               // of done, those handed over to their successors (handover.go)
	longest time.Duration     // the slowest of them: end of admission to the deletion

	// The prepare phase of its partitions (warm.go): how many the
	// successor had prepared (warm) or not (cold: the warm timeout passed),
	// and the longest, from the start of the move to the end of admission.
	warm, cold int
	prepare    time.Duration
}

// release hands p off: it stops admitting work for p, and the drain (on
// another goroutine) waits for the work in flight; drained then cancels
// the tenure's context. m is the prepare phase that preceded it (nil if
// none), which ended with the successor ready or not.
func (l *loop) release(p int, m *move, ready bool) {
	l.flushAcquired()
	rec := l.rec(p)
	b := rec.handoff // the batch of its move, if it had a prepare phase
	if b == nil {
		if l.handoff == nil {
			l.handoff = l.newHandoff()
		}
		b = l.handoff
		b.pending++
	}
	b.stopped[p] = l.n.clock.Now()
	if m != nil {
		l.n.report.prepareEnded(b, m, ready)
	}
	t := rec.t
	l.transition(p, &record{phase: phaseDraining, t: t, handoff: b}, 0)
	l.releaseQ = append(l.releaseQ, t)
}

// newHandoff returns a new handoff batch, for the reason of a planned
// release now.
func (l *loop) newHandoff() *handoff {
	r := reasonMoved
	if l.closing {
		r = reasonClosed
	}
	return &handoff{reason: r, stopped: map[int]time.Time{}}
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

// leftHandoff records that p left its handoff batch b (its claim deleted,
// or its tenure lost), and logs the batch once the last partition has
// left.
func (l *loop) leftHandoff(b *handoff) {
	b.pending--
	if b.pending == 0 {
		l.n.report.handoffEnded(b, leaseString(l.gen))
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
		n.post(gen, drainDone{ts: ready, deadline: deadline})
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
	n.post(gen, drainDone{ts: []*tenure{t}, deadline: deadline, expired: expired})
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
	n.post(gen, releasedAck{ts: ts})
}

// drained handles the end of the drains of ts (expired: the drain timeout
// passed with work still in flight): each tenure still draining has its
// context cancelled, for its batch's reason, and gets its OnReleased; its
// claim is deleted once that has returned (see Node.awaitReleased), or at
// once if the drain timed out.
func (l *loop) drained(ts []*tenure, deadline time.Time, expired bool) {
	var done []*tenure
	var last <-chan struct{}
	for _, t := range ts {
		rec := l.rec(t.p)
		if rec.t != t || rec.phase != phaseDraining {
			continue // lost meanwhile
		}
		if ack := l.transition(t.p, &record{phase: phaseReleasing, t: t, handoff: rec.handoff}, rec.handoff.reason); ack != nil {
			last = ack // callbacks run in order: the last one returns last
		}
		done = append(done, t)
	}
	if len(done) == 0 {
		return
	}
	if expired || last == nil {
		l.released(done)
		return
	}
	n, gen := l.n, l.gen
	n.spawn(func() { n.awaitReleased(gen, done, last, deadline) })
}

// released deletes the claims of the handed-off tenures ts whose
// OnReleased has returned.
func (l *loop) released(ts []*tenure) {
	for _, t := range ts {
		if rec := l.rec(t.p); rec.t == t && rec.phase == phaseReleasing {
			l.startDelete(t.p, t.token.Epoch, rec.handoff)
		}
	}
}
