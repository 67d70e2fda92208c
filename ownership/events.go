package ownership

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
)

// ops derives a Node's events and metrics from what its event loop
// publishes: every routing snapshot is compared with the previous one, so
// that the state machine needs only a few one-line hooks. The fields below
// sess and drained are touched by the event loop only.
type ops struct {
	n *Node
	m *nodeMetrics

	sess    atomic.Pointer[election.Session] // the session of the current generation
	drained atomic.Bool                      // this node is drained, as it last saw

	// pendingSince[p] is when this node first saw partition p assigned to
	// it by the ring and not served by it; zero otherwise.
	pendingSince []time.Time
	// handoffs[p] is a planned release of p in progress: its epoch and when
	// admission ended.
	handoffs []handoff
}

type handoff struct {
	epoch int64
	at    time.Time
}

// acquisition and release are one partition's change, for the event lines.
type acquisition struct {
	p       int
	epoch   int64
	unowned time.Duration
}

type release struct {
	p      int
	epoch  int64
	reason Reason
	forced bool
}

func newOps(n *Node) (*ops, error) {
	m, err := newNodeMetrics(n)
	if err != nil {
		return nil, err
	}
	return &ops{
		n:            n,
		m:            m,
		pendingSince: make([]time.Time, n.cfg.Ring.Partitions),
		handoffs:     make([]handoff, n.cfg.Ring.Partitions),
	}, nil
}

// close unregisters the node's metrics.
func (o *ops) close() { o.m.unregister() }

// published is called by the event loop after it published s, which
// replaced old (nil for the first snapshot). It counts and logs the
// partitions acquired and released in between, the handoffs completed, and
// a drain mark on this node.
func (o *ops) published(l *loop, old, s *snapshot) {
	n := o.n
	now := n.clock.Now()
	o.sess.Store(l.gen.sess)
	live := l.gen.ctx.Err() == nil && l.lost == nil
	lease := fmt.Sprintf("%x", int64(l.gen.lease))
	if d := l.fleet.drained[n.id]; d != o.drained.Load() {
		o.drained.Store(d)
		if d {
			o.m.drained()
			n.log.Info("drain observed: the ring excludes this node; its partitions move away", "lease", lease)
		} else {
			n.log.Info("undrain observed: the ring includes this node again", "lease", lease)
		}
	}
	var acq []acquisition
	var rel []release
	for p := range s.routes {
		e := &s.routes[p]
		var before *tenure
		if old != nil {
			before = old.routes[p].t
		}
		if before != nil && before != e.t {
			r := release{p: p, epoch: before.token.Epoch, reason: before.reason}
			if st := l.state(p); r.reason == 0 && st.t == before {
				r.reason = st.reason // draining: the reason is recorded when the context is cancelled
			}
			r.forced = r.reason == ReasonLost && live && !s.closed
			rel = append(rel, r)
			if r.reason != ReasonLost && live {
				o.handoffs[p] = handoff{epoch: r.epoch, at: now}
			}
		}
		if h := o.handoffs[p]; h.epoch != 0 && (!live || e.route.Epoch != h.epoch) {
			if live {
				o.m.handoffDone(now.Sub(h.at))
			}
			o.handoffs[p] = handoff{}
		}
		if e.t != nil && e.t != before {
			a := acquisition{p: p, epoch: e.t.token.Epoch}
			if since := o.pendingSince[p]; !since.IsZero() {
				a.unowned = now.Sub(since)
			}
			acq = append(acq, a)
		}
		switch {
		case e.t != nil || e.next != n.id || !live || s.closed:
			o.pendingSince[p] = time.Time{}
		case o.pendingSince[p].IsZero():
			o.pendingSince[p] = now
		}
	}
	o.logReleased(rel, lease)
	o.logAcquired(acq, lease)
}

// logAcquired counts and logs the partitions acquired by one snapshot: one
// Info line for one partition, else one Info line with the count and the
// longest unowned time and one Debug line with the list.
func (o *ops) logAcquired(acq []acquisition, lease string) {
	if len(acq) == 0 {
		return
	}
	log := o.n.log
	for _, a := range acq {
		o.m.acquired(a.unowned)
	}
	if len(acq) == 1 {
		a := acq[0]
		log.Info("partition acquired", "partition", a.p, "epoch", a.epoch, "lease", lease, "unowned_for", a.unowned)
		return
	}
	ps, epochs := make([]int, len(acq)), make([]int64, len(acq))
	var longest time.Duration
	for i, a := range acq {
		ps[i], epochs[i] = a.p, a.epoch
		longest = max(longest, a.unowned)
	}
	log.Info(fmt.Sprintf("acquired %d partitions", len(acq)), "partitions", len(acq), "lease", lease,
		"epochs", fmt.Sprintf("%d..%d", slices.Min(epochs), slices.Max(epochs)), "longest_unowned_for", longest)
	if log.IsDebug() {
		log.Debug("partitions acquired", "partition", ps, "epoch", epochs, "lease", lease)
	}
}

// logReleased counts and logs the tenures that ended by one snapshot, by
// reason, as logAcquired does; a forced release gets its own Warn line.
func (o *ops) logReleased(rel []release, lease string) {
	if len(rel) == 0 {
		return
	}
	log := o.n.log
	for _, reason := range releaseReasons {
		var ps []int
		var epochs []int64
		for _, r := range rel {
			if r.reason != reason {
				continue
			}
			o.m.released(r.reason)
			if r.forced {
				o.m.forcedRelease()
				log.Warn("forced release observed: the claim was deleted while the session lived",
					"partition", r.p, "epoch", r.epoch, "lease", lease)
			}
			ps, epochs = append(ps, r.p), append(epochs, r.epoch)
		}
		switch len(ps) {
		case 0:
		case 1:
			log.Info("partition released", "partition", ps[0], "epoch", epochs[0], "lease", lease, "reason", reason.String())
		default:
			log.Info(fmt.Sprintf("released %d partitions", len(ps)), "partitions", len(ps), "lease", lease, "reason", reason.String())
			if log.IsDebug() {
				log.Debug("partitions released", "partition", ps, "epoch", epochs, "lease", lease, "reason", reason.String())
			}
		}
	}
}

// fencerFailed counts a failed advance of t's fencers and logs a rejection
// by a store (fence.ErrStale): a newer owner fenced this epoch out.
func (o *ops) fencerFailed(t *tenure, err error) {
	o.m.fencerFailed()
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		o.n.log.Warn("fence rejection: a store refused this node's epoch as stale",
			"partition", t.p, "epoch", t.token.Epoch, "scope", stale.Scope, "presented", stale.Presented, "current", stale.Current)
	}
}

// claimConflict counts a claim of p that another node's claim beat.
func (o *ops) claimConflict(p int) {
	o.m.claimConflict()
	o.n.log.Debug("claim conflict: another node holds the partition", "partition", p)
}

// The recording methods of nodeMetrics; all are no-ops on nil.

func (m *nodeMetrics) acquired(unowned time.Duration) {
	if m != nil {
		m.acquisitions.Inc()
		m.unowned.Observe(unowned.Seconds())
	}
}

func (m *nodeMetrics) released(r Reason) {
	if m != nil {
		m.releases.WithLabelValues(r.String()).Inc()
	}
}

func (m *nodeMetrics) handoffDone(d time.Duration) {
	if m != nil {
		m.handoff.Observe(d.Seconds())
	}
}

func (m *nodeMetrics) forcedRelease() {
	if m != nil {
		m.forced.Inc()
	}
}

func (m *nodeMetrics) drained() {
	if m != nil {
		m.drains.Inc()
	}
}

func (m *nodeMetrics) fencerFailed() {
	if m != nil {
		m.fencerFailures.Inc()
	}
}

func (m *nodeMetrics) claimConflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}
