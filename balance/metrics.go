package balance

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Balancer's Prometheus metrics; nil records nothing.
type metrics struct {
	imbalanceG prometheus.Gauge
	movesC     *prometheus.CounterVec
	passesC    *prometheus.CounterVec
}

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
	m.imbalanceG, err = register(reg, m.imbalanceG)
	if err != nil {
		return nil, err
	}
	if m.movesC, err = register(reg, m.movesC); err != nil {
		return nil, err
	}
	if m.passesC, err = register(reg, m.passesC); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered
// under its name, so that balancers can share a registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
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
