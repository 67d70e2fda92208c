package sqlfence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// storeLabel is the value of the store label of this package's metrics.
const storeLabel = "sql"

// newFenceMetrics returns the metrics that count the tokens Fences admit
// and refuse, in the registry of Config.Metrics:
//
//	tenure_fence_admitted_total{store="sql"}                      counter  tokens admitted (Advance, Exec, Do, ExecGuarded, AdvanceAll, Batcher)
//	tenure_fence_rejections_total{store="sql",scope_kind="..."}   counter  stale tokens refused
//
// scope_kind is partition ("p/<n>"), leader ("leader/<name>") or other.
// The other fence stores export the same two metrics with their own store
// label, so they share a registry, and every Fences given one registry
// counts into the same two collectors. A rising rejection rate is the
// alarm for stale holders. A nil reg gives nil: no metrics (the
// methods of a nil *metrics.Fence do nothing).
func newFenceMetrics(reg prometheus.Registerer) (*metrics.Fence, error) {
	if reg == nil {
		return nil, nil
	}
	return metrics.SharedFence(reg, storeLabel, ErrInvalidConfig, ErrMetrics)
}
