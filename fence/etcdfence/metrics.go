package etcdfence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// StoreLabel is the value of the store label of the metrics of this package.
const StoreLabel = "etcd"

// Metrics counts the tokens Stores admit and refuse:
//
//	tenure_fence_admitted_total{store="etcd"}                      counter  tokens admitted (writes, Get, Advance)
//	tenure_fence_rejections_total{store="etcd",scope_kind="..."}   counter  stale tokens refused
//
// scope_kind is partition ("p/<n>"), leader ("leader/<name>") or other.
// The other fence stores export the same two metrics with their own store
// label, so they share a registry. A rising rejection rate is the alarm
// for stale holders. A Metrics is safe for concurrent use and may serve
// several Stores; methods on a nil *Metrics do nothing.
type Metrics = metrics.Fence

// NewMetrics creates the metrics and registers them with reg. It returns an
// error wrapping ErrNilArgument for a nil reg (a typed nil included), and
// one wrapping ErrMetrics and the registry's error (a
// prometheus.AlreadyRegisteredError when they are registered already) if
// they cannot be registered. Unregister undoes the registration.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	return metrics.NewStoreFence(reg, StoreLabel, ErrNilArgument, ErrMetrics)
}
