// Package metrics holds what tenure's packages share about their Prometheus
// metrics: the namespace, the bucket layouts, registration of a component's
// collectors as one set (all or none, undone by Unregister), and the
// definitions of the metrics that several packages export under one name
// (the fence stores' admissions and rejections), so that their help texts
// and label names agree, as a registry requires.
//
// The project-wide rules: a component takes an optional
// prometheus.Registerer (nil means no metrics; never the global registry),
// registers its collectors when it is constructed and unregisters them when
// it ends; names are tenure_<subsystem>_..., in base units, counters end in
// _total; labels are bounded (no per-key, per-partition or per-lease label)
// and an instance is told apart by const labels (prometheus.WrapRegistererWith).
package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every tenure metric.
const Namespace = "tenure"

// LatencyBuckets is the bucket layout, in seconds, of round trips to etcd or
// to a store: 1ms to 10s.
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// TenureBuckets is the bucket layout, in seconds, of how long a tenure (a
// term, a partition's ownership, a session) lasted: 1s to about 3 days,
// each bucket 4 times the previous one.
var TenureBuckets = prometheus.ExponentialBuckets(1, 4, 10)

// Set is the collectors one component registered, unregistered together.
// A Set is safe for concurrent use.
type Set struct {
	reg  prometheus.Registerer
	cs   []prometheus.Collector
	once sync.Once
}

// Register registers every collector with reg, or none: if one fails, those
// already registered are unregistered and the error is returned
// (a prometheus.AlreadyRegisteredError when a collector with the same
// descriptors is registered already).
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) (*Set, error) {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return &Set{reg: reg, cs: cs}, nil
}

// Unregister unregisters the set's collectors, so that a component with the
// same labels can register again. It is idempotent, and a no-op on a nil Set.
func (s *Set) Unregister() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		for _, c := range s.cs {
			s.reg.Unregister(c)
		}
	})
}

// IsAlreadyRegistered reports whether err says a collector was registered
// already.
func IsAlreadyRegistered(err error) bool {
	var are prometheus.AlreadyRegisteredError
	return errors.As(err, &are)
}

// Shared registers c with reg and returns it (added), or, if reg has a
// collector of c's type with c's descriptors already, returns that one:
// components that come and go (a node's sessions, the Stores of one
// registry) share one collector so that its counters add up across them.
// Any other error is the registry's.
func Shared[T prometheus.Collector](reg prometheus.Registerer, c T) (_ T, added bool, _ error) {
	err := reg.Register(c)
	if err == nil {
		return c, true, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, false, nil
		}
	}
	var zero T
	return zero, false, err
}

// Tracker is a prometheus.Registerer that registers through another and
// remembers what it registered, so that the owner of components that
// register themselves (a node, the metrics of its sessions) unregisters
// them together. A Tracker is safe for concurrent use.
type Tracker struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

// NewTracker returns a Tracker that registers with reg.
func NewTracker(reg prometheus.Registerer) *Tracker { return &Tracker{reg: reg} }

// Register implements prometheus.Registerer.
func (t *Tracker) Register(c prometheus.Collector) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reg.Register(c); err != nil {
		return err
	}
	t.cs = append(t.cs, c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (t *Tracker) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (t *Tracker) Unregister(c prometheus.Collector) bool { return t.reg.Unregister(c) }

// UnregisterAll unregisters every collector registered through t. It is
// idempotent, and a no-op on a nil Tracker.
func (t *Tracker) UnregisterAll() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.cs {
		t.reg.Unregister(c)
	}
	t.cs = nil
}
