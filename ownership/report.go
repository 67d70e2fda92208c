package ownership

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/fleetview"
)

// report tells what happens to a Node, in its log and its metrics. The
// event loop reports each event once, on the edge where it happens:
// acquisitions (with the failovers among them, failover.go) and ends of
// served tenures on their records' transitions (loop.transition), a
// handoff batch completed (handoffDone), tenures lost with the session
// (sessionLost) or to someone else's deletion of their claims
// (forcedReleases); as it applies an update of the fleet, the deletions
// that tell a failover (fleetChanging); and, as it publishes a routing
// snapshot, a drain mark on this node, the partitions the ring gives this
// node that nobody holds, and the claim batches whose last tenure has
// served or ended (batchlog.go). Only the event loop calls its methods,
// but drained, which Status reads.
type report struct {
	n *Node
	m *nodeMetrics

	drained atomic.Bool // this node is drained, as it last saw

	// unownedSince[p] is when this node first saw partition p assigned to
	// it by the ring with no claim of another node (the previous owner's
	// claim deleted, or gone with its lease) and not served by it; zero
	// otherwise.
	unownedSince []time.Time

	failovers *failovers // the lost claims this node may take over (failover.go)

	// batches are the claim batches whose acquisitions are not logged
	// yet, by epoch: the tenures of one claim transaction share its
	// revision as their epoch.
	batches map[int64]*claimBatch

	// rewinds are the partitions whose fencing a rewind of etcd's
	// revisions holds back (rewind.go), and rewound their list for Status.
	rewinds map[int]*RewindError
	rewound atomic.Pointer[[]RewindError]
}

// acquisition is one tenure that started serving, for its OnAcquired, its
// metric and the event line.
type acquisition struct {
	t        *tenure
	unowned  time.Duration // how long its partition went unowned, as this node saw it
	failover failover      // its failover, if it is one
}

// claimBatch is the tenures of one claim transaction that have started
// serving, until every tenure of the transaction serves or has ended.
type claimBatch struct {
	lease string
	acq   []acquisition
}

func newReport(n *Node) (*report, error) {
	o := &report{
		n:            n,
		unownedSince: make([]time.Time, n.cfg.Ring.Partitions),
		failovers:    newFailovers(),
		batches:      map[int64]*claimBatch{},
		rewinds:      map[int]*RewindError{},
	}
	m, err := newNodeMetrics(n, o)
	if err != nil {
		return nil, err
	}
	o.m = m
	return o, nil
}

// close unregisters the node's metrics.
func (o *report) close() { o.m.unregister() }

// acquisition returns the acquisition of t, which starts serving now.
func (o *report) acquisition(t *tenure) acquisition {
	now := o.n.clock.Now()
	a := acquisition{t: t, failover: o.failovers.takeover(t.p, t.token.Epoch, now)}
	if t.p < len(o.unownedSince) && !o.unownedSince[t.p].IsZero() {
		since := o.unownedSince[t.p]
		a.unowned = now.Sub(since)
	}
	return a
}

// fleetChanging is called by the event loop with each update of the fleet
// before it applies it: the deletions of claims and member keys tell a
// failover (failover.go).
func (o *report) fleetChanging(l *loop, u fleetview.Update) {
	o.failovers.observe(l.fleet, u, o.n.id, l.gen.lease, o.n.clock.Now())
}

// published is called by the event loop after it published s. It logs a
// drain mark on this node, follows how long the partitions the ring gives
// this node go unowned, and logs the claim batches that are complete.
func (o *report) published(l *loop, s *snapshot) {
	n := o.n
	now := n.clock.Now()
	live := l.gen.ctx.Err() == nil && l.lost == nil
	if d := l.fleet.Drained[n.id]; d != o.drained.Load() {
		o.drained.Store(d)
		lease := leaseString(l.gen)
		if d {
			o.m.drained()
			n.log.Info("drain observed: the ring excludes this node; its partitions move away", "lease", lease)
		} else {
			n.log.Info("undrain observed: the ring includes this node again", "lease", lease)
		}
	}
	if n := len(s.routes); n > len(o.unownedSince) {
		o.unownedSince = append(o.unownedSince, make([]time.Time, n-len(o.unownedSince))...)
	}
	for p := range s.routes {
		e := &s.routes[p]
		// A route of this node that it does not serve has epoch 0 (see
		// entry.unserved); another node's claim has its epoch.
		switch {
		case e.rec.acquired() || e.next != n.id || e.route.Epoch != 0 || !live || s.closed:
			o.unownedSince[p] = time.Time{}
		case o.unownedSince[p].IsZero():
			o.unownedSince[p] = now
		}
	}
	o.logBatches(l.acquiredQ)
}

// leaseString is gen's lease as the logs show it.
func leaseString(gen *generation) string { return fmt.Sprintf("%x", int64(gen.lease)) }

// acquired counts the tenures of acq, which started serving and whose
// OnAcquired is queued, under lease, and logs the claim batches that are
// complete (logBatches).
func (o *report) acquired(acq []acquisition, lease string) {
	for _, a := range acq {
		o.m.acquired(a.unowned)
		o.m.failedOver(a.failover)
		b := o.batches[a.t.token.Epoch]
		if b == nil {
			b = &claimBatch{lease: lease}
			o.batches[a.t.token.Epoch] = b
		}
		b.acq = append(b.acq, a)
	}
	o.logBatches(nil)
}

// tenureEnded counts the end of a served tenure, for the reason its
// OnReleased is given. The event loop calls it once per served tenure, as
// it queues that OnReleased.
func (o *report) tenureEnded(t *tenure) { o.m.released(t.reason) }

// handoffDone records one partition of b whose claim was deleted or
// handed over: its handoff took from the end of admission to now.
func (o *report) handoffDone(b *handoff, p int) {
	d := o.n.clock.Now().Sub(b.stopped[p])
	o.m.handoffDone(d)
	b.done = append(b.done, p)
	b.longest = max(b.longest, d)
}

// prepareEnded records the end of the prepare phase m of a partition of
// b, whose successor was ready or not (the warm timeout passed).
func (o *report) prepareEnded(b *handoff, m *move, ready bool) {
	d := o.n.clock.Now().Sub(m.since)
	o.m.prepareEnded(d, ready)
	if ready {
		b.warm++
	} else {
		b.cold++
	}
	b.prepare = max(b.prepare, d)
}

// handoffEnded logs a handoff batch whose partitions have all left it: one
// Info line with the partitions whose claims were deleted or handed over
// (handed_over: how many of them were handed over), how long their
// prepare phase took at most (from the start of the move to the end of
// admission; warm: successor ready, cold: the warm timeout passed) and how
// long the batch took from the end of admission to the last deletion or
// hand-over.
// Partitions lost meanwhile are told by the loss's own line.
func (o *report) handoffEnded(b *handoff, lease string) {
	if len(b.done) == 0 {
		return
	}
	o.n.log.Info("released "+partitionCount(len(b.done)), "reason", b.reason.String(), "count", len(b.done),
		"partitions", partitionRanges(b.done), "lease", lease, "prepare", b.prepare, "warm", b.warm, "cold", b.cold,
		"handoff", b.longest, "handed_over", b.handed)
}

// sessionLost logs, in one Warn line, the tenures ts that ended with the
// session of gen, with the session's cause (election.LossCause: the one
// the session counted its loss under).
func (o *report) sessionLost(gen *generation, ts []*tenure, err error) {
	ps := make([]int, len(ts))
	for i, t := range ts {
		ps[i] = t.p
	}
	o.n.log.Warn("session lost: released "+partitionCount(len(ps)), "reason", reasonLost.String(),
		"cause", election.LossCause(gen.sess.Err()), "count", len(ps), "partitions", partitionRanges(ps),
		"lease", leaseString(gen), "error", err)
}

// forcedReleases counts and logs, in one Warn line, the tenures ts whose
// claims someone else deleted while this node's session lived (its lease
// checked alive after the deletion): an operator's force release.
func (o *report) forcedReleases(gen *generation, ts []*tenure) {
	if len(ts) == 0 {
		return
	}
	ps, epochs := make([]int, len(ts)), make([]int64, len(ts))
	for i, t := range ts {
		ps[i], epochs[i] = t.p, t.token.Epoch
		o.m.forcedRelease()
	}
	o.n.log.Warn("forced release observed: claims deleted by someone else while the session lived",
		"reason", reasonLost.String(), "count", len(ps), "partitions", partitionRanges(ps), "epochs", epochRange(epochs),
		"lease", leaseString(gen))
}

// closeAborted logs, in one Info line, the tenures ts that ended without a
// handoff because Close's context ended.
func (o *report) closeAborted(gen *generation, ts []*tenure) {
	if len(ts) == 0 {
		return
	}
	ps := make([]int, len(ts))
	for i, t := range ts {
		ps[i] = t.p
	}
	o.n.log.Info("released "+partitionCount(len(ps))+" without a handoff: Close's context ended", "reason", reasonClosed.String(),
		"count", len(ps), "partitions", partitionRanges(ps), "lease", leaseString(gen))
}

// partitionCount returns "1 partition" or "n partitions".
func partitionCount(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return strconv.Itoa(n) + " partitions"
}

// epochRange returns "e" for one epoch, "min..max" for several.
func epochRange(epochs []int64) string {
	lo, hi := slices.Min(epochs), slices.Max(epochs)
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return strconv.FormatInt(lo, 10) + ".." + strconv.FormatInt(hi, 10)
}

// partitionRanges writes a set of partitions as the logs show it: ascending, runs
// of consecutive partitions as first-last, separated by commas
// ("0-5,9,12-15"); duplicates count once, and no partitions is "".
func partitionRanges(ps []int) string {
	s := slices.Clone(ps)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// fencerFailed counts a failed advance of t's fencers and logs a rejection
// by a store (fence.ErrStale): a newer owner fenced this epoch out.
func (o *report) fencerFailed(t *tenure, err error) {
	o.m.fencerFailed()
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		o.n.log.Warn("fence rejection: a store refused this node's epoch as stale",
			"partition", t.p, "epoch", t.token.Epoch, "scope", stale.Scope, "presented", stale.Presented, "current", stale.Current)
	}
}

// groupMoved counts a group of a resize this node moved (marked done, or
// moved back), d after it saw its moving key.
func (o *report) groupMoved(d time.Duration) { o.m.groupMoved(d) }

// claimConflict counts a claim of p that another node's claim beat.
func (o *report) claimConflict(p int) {
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

func (m *nodeMetrics) failedOver(f failover) {
	if m != nil && f.cause != 0 {
		m.failovers.WithLabelValues(f.cause.String()).Inc()
		m.takeover.Observe(f.takeover.Seconds())
		if f.sinceRenewal > 0 {
			m.failover.Observe(f.sinceRenewal.Seconds())
		}
	}
}

func (m *nodeMetrics) released(r reason) {
	if m != nil {
		m.releases.WithLabelValues(r.String()).Inc()
	}
}

func (m *nodeMetrics) handoffDone(d time.Duration) {
	if m != nil {
		m.handoff.Observe(d.Seconds())
	}
}

func (m *nodeMetrics) prepareEnded(d time.Duration, ready bool) {
	if m != nil {
		outcome := "cold"
		if ready {
			outcome = "warm"
		}
		m.prepare.WithLabelValues(outcome).Observe(d.Seconds())
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

func (m *nodeMetrics) rewound() {
	if m != nil {
		m.rewinds.Inc()
	}
}

func (m *nodeMetrics) claimConflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}
