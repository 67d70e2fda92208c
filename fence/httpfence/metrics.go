package httpfence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// StoreLabel is the value of the store label of the metrics of this package.
const StoreLabel = "http"

// Metrics counts what Handlers admit and refuse:
//
//	tenure_fence_admitted_total{store="http"}                        counter  requests whose token the Fencer admitted
//	tenure_fence_rejections_total{store="http",scope_kind="..."}     counter  requests refused: stale, invalid or missing token, or the fence could not decide
//
// scope_kind is the kind of the token's scope: partition ("p/<n>"), leader
// ("leader/<name>"), or other (any other scope, and requests refused before
// a token was read). Requests that Handler.Optional lets through without a
// token are not counted. The fence stores of other packages export the
// same two metrics with their own store label, so they share a registry
// with these. A Metrics is safe for concurrent use and may serve several
// Handlers; methods on a nil *Metrics do nothing.
type Metrics = metrics.Fence

// NewMetrics creates the metrics and registers them with reg. It returns an
// error wrapping ErrNilArgument for a nil reg (a typed nil included), and
// one wrapping ErrMetrics and the registry's error (a
// prometheus.AlreadyRegisteredError when they are registered already) if
// they cannot be registered. Unregister undoes the registration.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	return metrics.NewStoreFence(reg, StoreLabel, ErrNilArgument, ErrMetrics)
}
