package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/nilness"
)

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
