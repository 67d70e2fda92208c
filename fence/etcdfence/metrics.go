package etcdfence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// storeLabel is the value of the store label of the metrics of this
// package.
const storeLabel = "etcd"

// newMetrics registers, with reg (Config.Metrics), the metrics of the
// tokens Stores admit and refuse:
//
//	tenure_fence_admitted_total{store="etcd"}                      counter  tokens admitted (writes, Get, Advance)
//	tenure_fence_rejections_total{store="etcd",scope_kind="..."}   counter  stale tokens refused
//
// scope_kind is partition ("p/<n>"), leader ("leader/<name>") or other.
// The other fence stores export the same two metrics with their own store
// label, so they share a registry. A rising rejection rate is the alarm
// for stale holders. Every Store given one registry counts into the same
// two metrics, which stay registered. A nil reg means no metrics: the
// methods of a nil *metrics.Fence do nothing.
func newMetrics(reg prometheus.Registerer) (*metrics.Fence, error) {
	if reg == nil {
		return nil, nil
	}
	return metrics.SharedFence(reg, storeLabel, ErrNilArgument, ErrMetrics)
}
