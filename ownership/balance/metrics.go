package balance

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	promx "github.com/tenure-go/tenure/internal/metrics"
)

// metrics are a Balancer's Prometheus metrics (see Balancer); nil
// records nothing.
type metrics struct {
	imbalanceG  prometheus.Gauge
	memberLoadG *prometheus.GaugeVec
	suspendedG  prometheus.Gauge
	movesC      *prometheus.CounterVec
	removedC    prometheus.Counter
	passesC     *prometheus.CounterVec

	mu      sync.Mutex
	members map[string]bool // the members memberLoadG has a series of
}

// newMetrics registers the metrics with reg, sharing those another
// Balancer registered there; nil reg means none.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		imbalanceG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tenure_balance_imbalance",
			Help: "Max over mean load per unit of weight among the members, at the last snapshot the balancer planned from."}),
		memberLoadG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tenure_balance_member_load",
			Help: "Each member's load (units per second) at the last snapshot the balancer planned from."}, []string{"member"}),
		suspendedG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tenure_balance_suspended",
			Help: "1 while an operator's suspension of the balancer stands (at the last snapshot), else 0."}),
		movesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tenure_balance_moves_total",
			Help: "Partitions moved, by cause: balance (the balancer's passes), pin (operators' pins and unpins), membership."}, []string{"cause"}),
		removedC: prometheus.NewCounter(prometheus.CounterOpts{Name: "tenure_balance_removed_total",
			Help: "Balancer moves removed because their node left or the ring agrees."}),
		passesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tenure_balance_passes_total",
			Help: "Balancer passes by result: applied, idle, suspended, alarm (an etcd alarm stood, such as NOSPACE: the balancer pauses), deposed, stale, error."}, []string{"result"}),
		members: map[string]bool{},
	}
	var err error
	if m.imbalanceG, _, err = promx.Shared(reg, m.imbalanceG); err != nil {
		return nil, err
	}
	if m.memberLoadG, _, err = promx.Shared(reg, m.memberLoadG); err != nil {
		return nil, err
	}
	if m.suspendedG, _, err = promx.Shared(reg, m.suspendedG); err != nil {
		return nil, err
	}
	if m.movesC, _, err = promx.Shared(reg, m.movesC); err != nil {
		return nil, err
	}
	if m.removedC, _, err = promx.Shared(reg, m.removedC); err != nil {
		return nil, err
	}
	if m.passesC, _, err = promx.Shared(reg, m.passesC); err != nil {
		return nil, err
	}
	return m, nil
}

// snapshot sets the gauges from a planned pass: the imbalance, the
// suspension and each member's load; the series of members no longer in
// the fleet are deleted.
func (m *metrics) snapshot(pl *Planned) {
	if m == nil {
		return
	}
	m.imbalanceG.Set(pl.Before)
	if pl.Suspended != nil {
		m.suspendedG.Set(1)
	} else {
		m.suspendedG.Set(0)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.members {
		if _, ok := pl.Loads[id]; !ok {
			m.memberLoadG.DeleteLabelValues(id)
			delete(m.members, id)
		}
	}
	for id, l := range pl.Loads {
		m.memberLoadG.WithLabelValues(id).Set(l)
		m.members[id] = true
	}
}

func (m *metrics) moves(cause string, n int) {
	if m != nil && n > 0 {
		m.movesC.WithLabelValues(cause).Add(float64(n))
	}
}

func (m *metrics) removed(n int) {
	if m != nil && n > 0 {
		m.removedC.Add(float64(n))
	}
}

func (m *metrics) pass(result string) {
	if m != nil {
		m.passesC.WithLabelValues(result).Inc()
	}
}
