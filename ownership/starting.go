package ownership

// The starting phase: a tenure whose fencers have been advanced admits no
// work until its OnAcquired has returned, so that what the callback loads
// is there before the first call. startServing enters it (fencing ->
// starting); fireAcquired queues OnAcquired, whose return is posted to the
// event loop (acquiredReturned), and starts the acquired timeout
// (acquiredTimeout); admit, at the first of the two, starts admitting work
// (starting -> serving). Meanwhile Lookup does not report the partition
// Local, Ready does not count it, and Hold answers a *WrongOwnerError with
// Acquiring set, which router and grpcroute wait out as a handoff
// (router/internal/admit) and answer once admission begins. A move away, a Close
// or a loss during the phase ends the tenure as from serving: no work was
// admitted, and its OnReleased follows its OnAcquired on the callback
// queue.

// startsFirst reports whether this node's tenures go through the starting
// phase: it has an OnAcquired and Config.AcquiredTimeout is positive.
func (n *Node) startsFirst() bool {
	return n.cfg.AcquiredTimeout > 0 && n.cfg.Callbacks.OnAcquired != nil
}

// admit starts admitting work for the tenures of ts that are still
// starting: their OnAcquired has returned, or the acquired timeout has
// passed. Those admitted before their OnAcquired returned are counted and
// logged together.
func (l *loop) admit(ts []*tenure) {
	for _, t := range ts {
		if rec := l.rec(t.p); rec.t == t && rec.phase == phaseStarting {
			l.transition(t.p, &record{phase: phaseServing, t: t}, 0)
		}
	}
	if len(l.earlyQ) > 0 {
		l.n.report.admittedEarly(l.earlyQ, leaseString(l.gen))
		clear(l.earlyQ)
		l.earlyQ = l.earlyQ[:0]
	}
}

// admittedEarly counts, and logs in one Warn line, the tenures ts that
// began admitting work before their OnAcquired returned, because
// Config.AcquiredTimeout passed.
func (o *report) admittedEarly(ts []*tenure, lease string) {
	ps, epochs := make([]int, len(ts)), make([]int64, len(ts))
	for i, t := range ts {
		ps[i], epochs[i] = t.p, t.token.Epoch
		o.m.admittedEarly()
	}
	o.n.log.Warn("acquired timeout: OnAcquired has not returned; admitting work for "+partitionCount(len(ps))+" anyway",
		"count", len(ps), "partitions", partitionRanges(ps), "epochs", epochRange(epochs),
		"timeout", o.n.cfg.AcquiredTimeout, "lease", lease)
}

func (m *nodeMetrics) admittedEarly() {
	if m != nil {
		m.acquiredTimeouts.Inc()
	}
}
