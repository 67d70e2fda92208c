package election

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// The values of the cause label of tenure_session_losses_total, as
// LossCause returns them.
const (
	lossExpired = "expired"
	lossRevoked = "revoked"
	lossDeleted = "deleted"
	lossClosed  = "closed"
	lossOther   = "other"
)

// LossCause classifies the end of a session: it returns the cause label of
// err, a Session's Err, and "" for nil (the session lives):
//
//	"expired"  ErrSessionExpired: the safe deadline came without an acknowledged renewal
//	"revoked"  ErrLeaseLost: etcd no longer had the lease, revoked or expired there
//	"deleted"  ErrKeyDeleted: a key its owner had bound to the lease (a node's member
//	           key) was deleted or replaced by someone else while the lease lived,
//	           and the owner ended the session (Session.EndKeyDeleted)
//	"closed"   ErrSessionClosed: the session's owner closed it
//	"other"    any other cause; not expected
//
// The session's loss metric, its log line and the health answers of its
// users all take their cause from it, so that one end is told one way.
func LossCause(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrSessionExpired):
		return lossExpired
	case errors.Is(err, ErrLeaseLost):
		return lossRevoked
	case errors.Is(err, ErrKeyDeleted):
		return lossDeleted
	case errors.Is(err, ErrSessionClosed):
		return lossClosed
	}
	return lossOther
}

// sessionMetrics are the Prometheus metrics of the sessions opened with
// one SessionConfig.Metrics registerer (see SessionConfig.Metrics). They
// are one collector, registered by the first such session and shared by
// the later ones (found through prometheus.AlreadyRegisteredError), so that
// the metrics outlive sessions: counters add up across sessions, and the
// margin gauge follows the session opened last.
type sessionMetrics struct {
	latency  prometheus.Histogram
	renewals prometheus.Counter
	failures prometheus.Counter
	opened   prometheus.Counter
	losses   *prometheus.CounterVec
	marginG  prometheus.GaugeFunc
	current  atomic.Pointer[Session] // the session opened last, while it lives
}

// sessionMetricsOf returns the session metrics registered with reg,
// registering them if reg has none yet; nil, nil for a nil reg. It returns
// an error wrapping ErrMetrics and the registry's error if they cannot be
// registered (another collector has their names).
func sessionMetricsOf(reg prometheus.Registerer) (*sessionMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	const sub = "session"
	m := &sessionMetrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "renewal_duration_seconds",
			Help:    "Time from sending a lease renewal to its acknowledgement, for acknowledged renewals.",
			Buckets: metrics.LatencyBuckets,
		}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "renewals_total",
			Help: "Acknowledged lease renewals.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "renewal_failures_total",
			Help: "Lease renewal attempts that failed or were not answered in time.",
		}),
		opened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "opened_total",
			Help: "Sessions opened (leases granted).",
		}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "losses_total",
			Help: "Sessions ended, each counted once by the cause of its end: expired (the safe deadline passed without an acknowledged renewal, a pause or an etcd outage), revoked (etcd no longer had the lease before the safe deadline), deleted (a key bound to the lease was deleted by someone else while the lease lived), closed (closed by its owner).",
		}, []string{"cause"}),
	}
	for _, c := range []string{lossExpired, lossRevoked, lossDeleted, lossClosed, lossOther} {
		m.losses.WithLabelValues(c)
	}
	m.marginG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: sub, Name: "safe_deadline_margin_seconds",
		Help: "Time left before the live session's safe deadline; 0 without a live session.",
	}, m.margin)
	shared, _, err := metrics.Shared(reg, m)
	if err != nil {
		return nil, fmt.Errorf("%w: session: %w", ErrMetrics, err)
	}
	return shared, nil
}

// collectors are the metrics m is made of.
func (m *sessionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.latency, m.renewals, m.failures, m.opened, m.losses, m.marginG}
}

// Describe implements prometheus.Collector.
func (m *sessionMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *sessionMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// margin is the value of the margin gauge.
func (m *sessionMetrics) margin() float64 {
	s := m.current.Load()
	if s == nil || s.Err() != nil {
		return 0
	}
	return s.Status().Remaining.Seconds()
}

// The hooks of a Session; all are no-ops on nil.

func (m *sessionMetrics) sessionOpened(s *Session) {
	if m != nil {
		m.opened.Inc()
		m.current.Store(s)
	}
}

func (m *sessionMetrics) sessionEnded(s *Session, cause error) {
	if m != nil {
		m.losses.WithLabelValues(LossCause(cause)).Inc()
		m.current.CompareAndSwap(s, nil)
	}
}

func (m *sessionMetrics) renewed(r renewal) {
	if m != nil {
		m.renewals.Inc()
		m.latency.Observe(r.acked.Sub(r.sent).Seconds())
	}
}

func (m *sessionMetrics) renewFailed() {
	if m != nil {
		m.failures.Inc()
	}
}

// electionMetrics are an Election's metrics; every method is a no-op on nil.
//
//	tenure_election_is_leader                 gauge      1 while this candidate holds a term Campaign handed out, else 0
//	tenure_election_terms_total               counter    terms won and handed out (fencers advanced)
//	tenure_election_campaign_failures_total   counter    Campaigns that returned an error, other than the caller's ctx, ErrAlreadyCampaigning or ErrElectionClosed
//	tenure_election_fencer_failures_total     counter    fencer Advance calls that failed
//	tenure_election_term_duration_seconds     histogram  how long each term lasted, observed when it ends
//	tenure_election_forced_releases_total     counter    terms ended because someone else deleted the leader key
//
// with the const labels election (the name) and candidate (the ID).
type electionMetrics struct {
	set              *metrics.Set
	terms            prometheus.Counter
	campaignFailures prometheus.Counter
	fencerFailures   prometheus.Counter
	forced           prometheus.Counter
	termDuration     prometheus.Histogram
}

// newElectionMetrics registers e's metrics with reg, under e's const labels.
func newElectionMetrics(reg prometheus.Registerer, e *Election) (*electionMetrics, error) {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"election": e.cfg.Name, "candidate": e.id}, reg)
	const sub = "election"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: name, Help: help})
	}
	m := &electionMetrics{
		terms:            counter("terms_total", "Terms won and handed out by Campaign, once every fencer was advanced."),
		campaignFailures: counter("campaign_failures_total", "Campaigns that failed: etcd errors, fencer failures, the session's end (not the caller's cancellation)."),
		fencerFailures:   counter("fencer_failures_total", "Fencer advances that failed for a term won."),
		forced:           counter("forced_releases_total", "Terms ended because someone else deleted or replaced the leader key (an operator's force release)."),
		termDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: sub, Name: "term_duration_seconds",
			Help:    "How long terms lasted, from Campaign handing the term out to its end; observed when a term ends.",
			Buckets: metrics.TenureBuckets,
		}),
	}
	isLeader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: sub, Name: "is_leader",
		Help: "1 while this candidate holds a term of the election, 0 otherwise.",
	}, func() float64 {
		if e.Status().Leader {
			return 1
		}
		return 0
	})
	set, err := metrics.Register(reg, isLeader, m.terms, m.campaignFailures, m.fencerFailures, m.forced, m.termDuration)
	if err != nil {
		return nil, fmt.Errorf("%w: election %q candidate %q: %w", ErrMetrics, e.cfg.Name, e.id, err)
	}
	m.set = set
	return m, nil
}

func (m *electionMetrics) unregister() {
	if m != nil {
		m.set.Unregister()
	}
}

func (m *electionMetrics) won() {
	if m != nil {
		m.terms.Inc()
	}
}

func (m *electionMetrics) campaignFailed() {
	if m != nil {
		m.campaignFailures.Inc()
	}
}

func (m *electionMetrics) fencerFailed() {
	if m != nil {
		m.fencerFailures.Inc()
	}
}

func (m *electionMetrics) termEnded(d time.Duration, forced bool) {
	if m == nil {
		return
	}
	m.termDuration.Observe(d.Seconds())
	if forced {
		m.forced.Inc()
	}
}
