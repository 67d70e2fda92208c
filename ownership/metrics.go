package ownership

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
)

// labelNode is the const label that tells the metrics of the nodes of one
// process apart: every metric a Node registers (its sessions' included)
// carries node=<NodeID>, so that several nodes can share one registry.
const labelNode = "node"

// The values of the reason label of tenure_partition_releases_total: the
// labels of reasonMoved, reasonLost and reasonClosed.
var releaseReasons = []reason{reasonMoved, reasonLost, reasonClosed}

// handoffBuckets is the bucket layout, in seconds, of handoffs and of the
// time partitions stay unowned: a planned move takes milliseconds, a
// failover about a TTL (10s by default) plus a second.
var handoffBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60}

// failoverBuckets is the bucket layout, in seconds, of the time from the
// last renewal of a lost holder to the takeover of its partitions: about a
// lease TTL (2s at least, 10s by default) plus the takeover, so that a
// threshold of TTL plus a few seconds falls on a bucket boundary.
var failoverBuckets = []float64{.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 11, 12.5, 15, 20, 30, 60, 120}

// nodeMetrics are a Node's Prometheus metrics (see the package
// documentation, "Operability"). A nil *nodeMetrics records nothing.
type nodeMetrics struct {
	set     *metrics.Set
	session *metrics.Tracker // registers the sessions' metrics; nil if the user set Session.Metrics

	acquisitions   prometheus.Counter
	releases       *prometheus.CounterVec
	conflicts      prometheus.Counter
	handoff        prometheus.Histogram
	prepare        *prometheus.HistogramVec
	unowned        prometheus.Histogram
	failovers      *prometheus.CounterVec
	failover       prometheus.Histogram
	takeover       prometheus.Histogram
	fencerFailures prometheus.Counter
	rewinds        prometheus.Counter
	forced         prometheus.Counter
	drains         prometheus.Counter

	acquiredTimeouts prometheus.Counter

	etcdAlarm   *prometheus.GaugeVec
	groupsMoved prometheus.Counter
	groupMove   prometheus.Histogram
}

// newNodeMetrics creates the metrics of node n, whose report is o, and registers them with
// cfg.Metrics under the const label node, and sets n.cfg.Session.Metrics,
// unless it is set, to the same registry, so that the node's sessions
// register theirs there and unregister stops them too. It
// returns nil, nil without a registerer, and an error wrapping ErrMetrics and
// the registry's error if the metrics cannot be registered (none is then).
func newNodeMetrics(n *Node, o *report) (*nodeMetrics, error) {
	if nilness.Is(n.cfg.Metrics) {
		return nil, nil
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{labelNode: n.id}, n.cfg.Metrics)
	const sub = "partition"
	m := &nodeMetrics{
		acquisitions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "acquisitions_total",
			Help: "Partitions this node acquired (claimed and fenced; counted as their OnAcquired is queued).",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "releases_total",
			Help: "Served tenures of this node that ended, counted as OnReleased is queued, by its reason: moved (the ring moved the partition away), lost (the session ended, or someone else deleted the claim), closed (the node left).",
		}, []string{"reason"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "claim_conflicts_total",
			Help: "Claims this node attempted that another node's claim beat (contention).",
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "handoff_duration_seconds",
			Help:    "Planned releases (moved or closed) whose claim this node deleted or handed over to the next owner: time from the moment the partition stopped admitting work (in-flight work draining included) to the transaction that deleted or handed over its claim.",
			Buckets: handoffBuckets,
		}),
		prepare: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "prepare_duration_seconds",
			Help:    "Planned moves away from this node: time from the start of the move (the ring gave the partition to another node) to the end of admission, while this node kept serving and the successor prepared, by outcome: warm (the successor said it was ready) or cold (the warm timeout passed, or no successor: the move went on without it).",
			Buckets: handoffBuckets,
		}, []string{"outcome"}),
		unowned: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "unowned_duration_seconds",
			Help:    "Observed when this node acquires a partition: how long, as this node saw it, the partition went unowned: from the moment this node saw it assigned to it by the ring with no other node's claim (the previous claim deleted, handed over to this node, or gone with its lease) to this node acquiring it (claimed and fenced).",
			Buckets: handoffBuckets,
		}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "failovers_total",
			Help: "Partitions this node took over after their previous holder lost its session, counted as each is acquired (claimed and fenced), by what etcd showed: lease_ended (the holder's claim deleted in the same revision as its member key, bound to the same lease: the lease expired, as after a crash or a pause past the TTL, or was revoked) or rejoined (the claim deleted after the holder's member key moved to a new lease of the same node: it lost its session, rejoined and deleted the claims of its old lease). Planned moves (graceful leave, drain, pins, balancer) and forced releases are never counted.",
		}, []string{"cause"}),
		failover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "failover_duration_seconds",
			Help:    "Partitions this node took over after their previous holder's lease ended (tenure_partition_failovers_total, cause lease_ended), whose holder published its lease TTL: time from the holder's last lease renewal to this node acquiring the partition (claimed and fenced; it admits work once its OnAcquired returns), at least: the time from this node seeing the holder's claim deleted to acquiring it, plus the TTL (etcd expires a lease no sooner than its TTL after its last renewal). A holder that crashed or stopped served at most one renewal interval past its last renewal; one cut off from etcd, until its safe deadline. A lease revoked by hand is measured the same way, though its last renewal may be more recent.",
			Buckets: failoverBuckets,
		}),
		takeover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "takeover_duration_seconds",
			Help:    "Partitions this node took over after their previous holder lost its session (every one tenure_partition_failovers_total counts): time from this node seeing the holder's claim deleted (the loss as etcd records it) to this node acquiring the partition (claimed and fenced; it admits work once its OnAcquired returns).",
			Buckets: handoffBuckets,
		}),
		fencerFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "fencer_failures_total",
			Help: "Failed advances of this node's fencers to a new epoch (each is retried).",
		}),
		rewinds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "fence_rewinds_total",
			Help: "Fencer advances of this node refused because a store's floor is above both the epoch etcd just issued and etcd's revision: etcd's revisions went backwards (restored from a snapshot?). Each is retried; the partition stays unserved until etcd's revision passes the floor. Also counted in tenure_fencer_failures_total.",
		}),
		forced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "forced_releases_total",
			Help: "Tenures that ended because someone else deleted this node's claim while its session lived (an operator's force release), as checked with etcd: claims that went with the session's lease (expired or revoked) are session losses, never counted here.",
		}),
		drains: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "drains_total",
			Help: "Times this node observed itself drained by an operator.",
		}),
		acquiredTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "acquired_timeouts_total",
			Help: "Tenures of this node that began admitting work before their OnAcquired returned, because Config.AcquiredTimeout passed.",
		}),
		groupsMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "resize", Name: "groups_moved_total",
			Help: "Groups of a resize of the partition count that this node moved: marked done (after every source partition's claim had ended) or, while the resize aborts, moved back (after every target's claim had ended).",
		}),
		groupMove: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: "resize", Name: "group_duration_seconds",
			Help:    "Groups of a resize of the partition count that this node moved: time from this node seeing the group's moving key to its transaction moving the group (the handoffs of the partitions that end included).",
			Buckets: handoffBuckets,
		}),
	}
	m.etcdAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "etcd_alarm",
		Help: "1 while etcd refuses this node's writes for the alarm named (NOSPACE: its database is full), as this node learned from its own writes (claims, claim deletions, its write checks before planned releases, its load reports when they change): from a refused write to the next that succeeds; 0 otherwise. A node that writes nothing does not notice an alarm. Meanwhile its planned releases wait and it keeps serving.",
	}, []string{"alarm"})
	m.etcdAlarm.WithLabelValues(alarmNoSpace)
	for _, r := range releaseReasons {
		m.releases.WithLabelValues(r.String())
	}
	for _, o := range []string{"warm", "cold"} {
		m.prepare.WithLabelValues(o)
	}
	for _, c := range failoverCauses { // exported at 0, so that increase() sees the first failover
		m.failovers.WithLabelValues(c.String())
	}
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "partitions_owned",
		Help: "Partitions this node serves.",
	}, func() float64 { return float64(len(n.snap.Load().owned)) })
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: sub, Name: "oldest_held_seconds",
		Help: "Age of the oldest tenure this node serves (from its claim's creation); 0 when it serves none.",
	}, n.oldestHeld)
	rewound := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "partitions_rewound",
		Help: "Partitions this node claimed but does not serve because a store's floor is above their epoch and above etcd's revision (etcd's revisions went backwards): 0 unless etcd was restored from a snapshot without --bump-revision.",
	}, func() float64 { return float64(len(o.rewoundNow())) })
	queue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "callback_queue_length",
		Help: "OnAcquired and OnReleased callbacks queued and not yet taken by the node's dispatcher: how far the callbacks lag behind.",
	}, func() float64 { return float64(n.disp.pending()) })

	set, err := metrics.Register(reg, m.acquisitions, m.releases, m.conflicts, m.handoff, m.prepare, m.unowned,
		m.failovers, m.failover, m.takeover, m.fencerFailures, m.rewinds, m.forced, m.drains, owned, oldest, queue, m.acquiredTimeouts, rewound, m.etcdAlarm,
		m.groupsMoved, m.groupMove)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %w", ErrMetrics, n.id, err)
	}
	if n.cfg.Session.Metrics == nil {
		m.session = metrics.NewTracker(reg)
		n.cfg.Session.Metrics = m.session
	}
	m.set = set
	return m, nil
}

// alarmNoSpace is the alarm label of tenure_etcd_alarm for etcd's NOSPACE
// alarm.
const alarmNoSpace = "NOSPACE"

// alarm sets tenure_etcd_alarm{alarm="NOSPACE"}.
func (m *nodeMetrics) alarm(on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.etcdAlarm.WithLabelValues(alarmNoSpace).Set(v)
}

// unregister unregisters every metric the node registered.
func (m *nodeMetrics) unregister() {
	if m != nil {
		m.set.Unregister()
		m.session.UnregisterAll()
	}
}

// oldestHeld is the value of tenure_partition_oldest_held_seconds.
func (n *Node) oldestHeld() float64 {
	s := n.snap.Load()
	now := n.clock.Now()
	var oldest float64
	for _, p := range s.owned {
		if since := s.routes[p].route.Since; !since.IsZero() {
			oldest = max(oldest, now.Sub(since).Seconds())
		}
	}
	return oldest
}

// pending returns the number of callbacks queued and not yet started.
func (d *dispatcher) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue)
}

// groupMoved counts a resize group this node moved, d after it saw the
// group's moving key.
func (m *nodeMetrics) groupMoved(d time.Duration) {
	if m == nil {
		return
	}
	m.groupsMoved.Inc()
	m.groupMove.Observe(d.Seconds())
}
