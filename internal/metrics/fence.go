package metrics

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/nilness"
)

// The values of the scope_kind label: what a fencing scope fences.
const (
	// ScopeKindPartition is a partition's scope, "p/<n>".
	ScopeKindPartition = "partition"
	// ScopeKindLeader is an election's scope, "leader/<name>".
	ScopeKindLeader = "leader"
	// ScopeKindOther is any other scope, or none (a request without a token).
	ScopeKindOther = "other"
)

// The label names of the fence metrics.
const (
	// LabelStore names the kind of fence store: "http", "etcd", "sql".
	LabelStore = "store"
	// LabelScopeKind is the kind of the refused token's scope (ScopeKind).
	LabelScopeKind = "scope_kind"
)

// ScopeKind returns the scope_kind label of scope: ScopeKindPartition for
// "p/<n>" (fence.PartitionScope), ScopeKindLeader for "leader/<name>"
// (fence.LeaderScope), ScopeKindOther for anything else. The label set is
// bounded whatever the scopes.
func ScopeKind(scope string) string {
	switch {
	case strings.HasPrefix(scope, "p/"):
		return ScopeKindPartition
	case strings.HasPrefix(scope, "leader/"):
		return ScopeKindLeader
	}
	return ScopeKindOther
}

// ScopeKinds lists every value ScopeKind returns.
var ScopeKinds = []string{ScopeKindPartition, ScopeKindLeader, ScopeKindOther}

// FenceRejections returns tenure_fence_rejections_total for a store kind
// (const label store), with the variable label scope_kind, every value of
// which is initialized to 0. Every fence store exports it through this
// function, so that stores of several kinds share one registry.
func FenceRejections(store string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace:   Namespace,
		Subsystem:   "fence",
		Name:        "rejections_total",
		Help:        "Tokens or requests the fence refused (stale, invalid or missing token, or the fence could not decide), by store kind and the kind of the token's scope.",
		ConstLabels: prometheus.Labels{LabelStore: store},
	}, []string{LabelScopeKind})
	for _, k := range ScopeKinds {
		v.WithLabelValues(k)
	}
	return v
}

// FenceAdmitted returns tenure_fence_admitted_total for a store kind (const
// label store). Every fence store exports it through this function.
func FenceAdmitted(store string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Namespace:   Namespace,
		Subsystem:   "fence",
		Name:        "admitted_total",
		Help:        "Tokens the fence admitted, by store kind.",
		ConstLabels: prometheus.Labels{LabelStore: store},
	})
}

// Fence is the pair of fence metrics of one store kind, registered
// together. Its methods are safe for concurrent use and do nothing on a nil
// *Fence, so a store without metrics calls them unconditionally.
type Fence struct {
	set        *Set
	admits     prometheus.Counter
	rejections *prometheus.CounterVec
}

// NewFence creates tenure_fence_admitted_total and
// tenure_fence_rejections_total for store and registers them with reg
// (both or neither). The error is the registry's.
func NewFence(reg prometheus.Registerer, store string) (*Fence, error) {
	f := &Fence{admits: FenceAdmitted(store), rejections: FenceRejections(store)}
	set, err := Register(reg, f.admits, f.rejections)
	if err != nil {
		return nil, err
	}
	f.set = set
	return f, nil
}

// Admitted counts n admitted tokens.
func (f *Fence) Admitted(n int) {
	if f != nil && n > 0 {
		f.admits.Add(float64(n))
	}
}

// Rejected counts a refused token of scope ("" when none was read).
func (f *Fence) Rejected(scope string) {
	if f != nil {
		f.rejections.WithLabelValues(ScopeKind(scope)).Inc()
	}
}

// Unregister unregisters the metrics; it is idempotent.
func (f *Fence) Unregister() {
	if f != nil {
		f.set.Unregister()
	}
}

// SharedFence returns the fence metrics of store kind store registered
// with reg: those registered already, by another component of the same
// kind on reg, or new ones it registers. Components that share a registry
// share the counts; none unregisters them. It refuses a nil reg (a typed
// nil included) with an error wrapping errNil, and wraps a registration
// failure in errMetrics together with the registry's error.
func SharedFence(reg prometheus.Registerer, store string, errNil, errMetrics error) (*Fence, error) {
	if nilness.Is(reg) {
		return nil, fmt.Errorf("%w: prometheus.Registerer %T", errNil, reg)
	}
	admits, added, err := Shared(reg, FenceAdmitted(store))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMetrics, err)
	}
	rejections, _, err := Shared(reg, FenceRejections(store))
	if err != nil {
		if added {
			reg.Unregister(admits)
		}
		return nil, fmt.Errorf("%w: %w", errMetrics, err)
	}
	return &Fence{admits: admits, rejections: rejections}, nil
}
