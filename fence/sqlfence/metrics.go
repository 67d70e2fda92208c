package sqlfence

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// storeLabel is the value of the store label of this package's metrics.
const storeLabel = "sql"

// fenceMetrics counts the tokens Fences admit and refuse, in the registry
// of Config.Metrics:
//
//	tenure_fence_admitted_total{store="sql"}                      counter  tokens admitted (Advance, Exec, Do, ExecGuarded, AdvanceAll, Batcher)
//	tenure_fence_rejections_total{store="sql",scope_kind="..."}   counter  stale tokens refused
//
// scope_kind is partition ("p/<n>"), leader ("leader/<name>") or other.
// The other fence stores export the same two metrics with their own store
// label, so they share a registry, and every Fences given one registry
// counts into the same two collectors. A rising rejection rate is the
// alarm for stale holders. Its methods are safe for concurrent use and do
// nothing on a nil *fenceMetrics (no registry).
type fenceMetrics struct {
	admitted   prometheus.Counter
	rejections *prometheus.CounterVec
}

// newFenceMetrics registers the metrics with reg, or finds those another
// Fences registered there. A nil reg gives nil: no metrics.
func newFenceMetrics(reg prometheus.Registerer) (*fenceMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	admitted, err := register(reg, metrics.FenceAdmitted(storeLabel))
	if err != nil {
		return nil, err
	}
	rejections, err := register(reg, metrics.FenceRejections(storeLabel))
	if err != nil {
		return nil, err
	}
	return &fenceMetrics{admitted: admitted, rejections: rejections}, nil
}

// register registers c with reg, or returns the collector of the same
// description registered there already.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("%w: %w", ErrMetrics, err)
}

func (m *fenceMetrics) Admitted(n int) {
	if m != nil && n > 0 {
		m.admitted.Add(float64(n))
	}
}

func (m *fenceMetrics) Rejected(scope string) {
	if m != nil {
		m.rejections.WithLabelValues(metrics.ScopeKind(scope)).Inc()
	}
}
