package balance

import (
	"github.com/prometheus/client_golang/prometheus"

	promx "github.com/tenure-go/tenure/internal/metrics"
)

// metrics are a Balancer's Prometheus metrics; nil records nothing.
type metrics struct {
	imbalanceG prometheus.Gauge
	movesC     *prometheus.CounterVec
	passesC    *prometheus.CounterVec
}

// newMetrics registers the metrics with reg, sharing those another
// Balancer registered there; nil reg means none.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		imbalanceG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tenure_balance_imbalance",
			Help: "Max over mean load per unit of weight among the members, before the last pass."}),
		movesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tenure_balance_moves_total",
			Help: "Balancer moves written (cause=balance) and removed (cause=removed)."}, []string{"cause"}),
		passesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tenure_balance_passes_total",
			Help: "Balancer passes by result: applied, idle, deposed, stale, error."}, []string{"result"}),
	}
	var err error
	if m.imbalanceG, _, err = promx.Shared(reg, m.imbalanceG); err != nil {
		return nil, err
	}
	if m.movesC, _, err = promx.Shared(reg, m.movesC); err != nil {
		return nil, err
	}
	if m.passesC, _, err = promx.Shared(reg, m.passesC); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) imbalance(v float64) {
	if m != nil {
		m.imbalanceG.Set(v)
	}
}

func (m *metrics) moves(cause string, n int) {
	if m != nil && n > 0 {
		m.movesC.WithLabelValues(cause).Add(float64(n))
	}
}

func (m *metrics) pass(result string) {
	if m != nil {
		m.passesC.WithLabelValues(result).Inc()
	}
}
