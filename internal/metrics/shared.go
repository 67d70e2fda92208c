package metrics

import (
	"errors"
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
	admits, added, err := registerShared(reg, FenceAdmitted(store))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMetrics, err)
	}
	rejections, _, err := registerShared(reg, FenceRejections(store))
	if err != nil {
		if added {
			reg.Unregister(admits)
		}
		return nil, fmt.Errorf("%w: %w", errMetrics, err)
	}
	return &Fence{admits: admits, rejections: rejections}, nil
}

// registerShared registers c with reg and returns it (added), or returns
// the collector reg holds already under c's descriptors.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) (_ C, added bool, _ error) {
	err := reg.Register(c)
	if err == nil {
		return c, true, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, false, nil
		}
	}
	var zero C
	return zero, false, err
}
