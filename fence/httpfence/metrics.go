package httpfence

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
)

// storeLabel is the value of the store label of the metrics of this package.
const storeLabel = "http"

// handlerMetrics counts what Handlers admit and refuse:
//
//	tenure_fence_admitted_total{store="http"}                        counter  requests whose token the Fencer admitted
//	tenure_fence_rejections_total{store="http",scope_kind="..."}     counter  requests refused: stale, unverified, invalid or missing token, or the fence could not decide
//	tenure_fence_verify_refusals_total{store="http",reason="..."}    counter  requests refused by the Handler's Verifier, before the Fencer
//
// scope_kind is the kind of the token's scope: partition ("p/<n>"), leader
// ("leader/<name>"), or other (any other scope, and requests refused before
// a token was read). reason says why the Verifier refused:
//
//	stale          a real token of a tenure that has ended (fence.ErrStale)
//	unsigned       no signature where one is required (fence.ErrUnsigned)
//	bad-signature  a malformed signature, or one that does not match the token (fence.ErrBadSignature)
//	unknown-key    a signature by a key ID the verifier has no key for (fence.ErrUnknownKey)
//	unknown-epoch  an epoch above every claim known for the scope (fence.ErrUnknownEpoch)
//	unknown-scope  a scope the verifier cannot check (fence.ErrUnknownScope)
//	unverified     any other fence.ErrUnverified
//	unavailable    the verifier could not decide (its etcd read failed)
//
// Requests that Config.Optional lets through without a token are not
// counted. The fence stores of other packages export the first two metrics
// with their own store label, so they share a registry with these. Methods
// on a nil *handlerMetrics do nothing.
type handlerMetrics struct {
	fence   *metrics.Fence
	refused *prometheus.CounterVec
}

// newHandlerMetrics returns the metrics registered with reg: those that
// another Handler registered there already, or new ones. The error wraps
// ErrMetrics and the registry's.
func newHandlerMetrics(reg prometheus.Registerer) (*handlerMetrics, error) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace:   metrics.Namespace,
		Subsystem:   "fence",
		Name:        "verify_refusals_total",
		Help:        "Requests whose token the Handler's verifier refused before the fence saw it, by reason.",
		ConstLabels: prometheus.Labels{metrics.LabelStore: storeLabel},
	}, []string{"reason"})
	for _, r := range reasons {
		refused.WithLabelValues(r)
	}
	refused, added, err := metrics.Shared(reg, refused)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMetrics, err)
	}
	f, err := metrics.SharedFence(reg, storeLabel, ErrNilArgument, ErrMetrics)
	if err != nil {
		if added {
			reg.Unregister(refused)
		}
		return nil, err
	}
	return &handlerMetrics{fence: f, refused: refused}, nil
}

// admitted counts an admitted request.
func (m *handlerMetrics) admitted() {
	if m != nil {
		m.fence.Admitted(1)
	}
}

// rejected counts a refused request whose token has scope ("" when none
// was read).
func (m *handlerMetrics) rejected(scope string) {
	if m != nil {
		m.fence.Rejected(scope)
	}
}

// unverified counts a request of scope that the verifier refused for
// reason; it counts as rejected too.
func (m *handlerMetrics) unverified(scope, reason string) {
	if m != nil {
		m.fence.Rejected(scope)
		m.refused.WithLabelValues(reason).Inc()
	}
}
