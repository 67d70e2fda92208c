package placement

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/ownership/balance"
)

// ErrInvalidConfig reports a Config that Validate refuses.
var ErrInvalidConfig = errors.New("placement: invalid config")

// Workload names a source of load.
type Workload string

// The workloads.
const (
	// Keys is Zipf-distributed rates over Config.Keys keys.
	Keys Workload = "keys"
	// Tenants is Config.Tenants tenants of log-uniform sizes.
	Tenants Workload = "tenants"
)

// Config configures Run.
type Config struct {
	// Fleets are the fleet sizes measured. Default 10 and 50.
	Fleets []int
	// Partitions is P. Default 1,024.
	Partitions int
	// Workloads are the workloads measured. Default keys and tenants.
	Workloads []Workload
	// Keys and ZipfS are the keys workload: key k (1-based) has rate
	// k^-ZipfS. Defaults 1,000,000 and 0.9.
	Keys  int
	ZipfS float64
	// Tenants and TenantMax are the tenants workload: sizes log-uniform
	// over [1, TenantMax]. Defaults 5,000 and 1,000.
	Tenants   int
	TenantMax float64
	// HeavyEvery gives every HeavyEvery-th node (0, HeavyEvery, ...)
	// weight 2 in the unequal fleets. Default 5 (a fifth of the fleet).
	HeavyEvery int
	// LoadInterval and LoadWindow are the load meter's tick and smoothing
	// time constant: ownership's defaults, 10s and 1 minute.
	LoadInterval, LoadWindow time.Duration
	// Noise is the multiplicative noise on every partition's count per
	// tick: uniform in [1-Noise, 1+Noise]. Default 0.2.
	Noise float64
	// Converge is the virtual time the balancer gets to converge from the
	// ring's placement. Default 15 minutes (30 passes at the default
	// interval).
	Converge time.Duration
	// Steady is the virtual time under stationary load with noise over
	// which moves are counted after convergence. Default 1 hour.
	Steady time.Duration
	// Hot is the hot tenant's rate after its jump, as a multiple of the
	// mean load per unit of weight. Default 0.5 (see DefaultConfig).
	Hot float64
	// HotWindow is how long the hot tenant is watched. Default 30 minutes.
	HotWindow time.Duration
	// Seed draws the tenants' sizes, the noise and the hot tenant.
	Seed uint64
	// Balance is the balancer's configuration. Default
	// balance.DefaultConfig().
	Balance balance.Config
	// LoadFactor is the ring's load factor. Default 1.25 (ring's default).
	LoadFactor float64
}

// DefaultConfig returns the sizes: fleets of 10 and 50 nodes,
// 1,024 partitions, 1,000,000 Zipf keys at s = 0.9 and 5,000 tenants of
// log-uniform sizes over 1..1,000, a fifth of the nodes at weight 2 in
// the unequal fleets, the nodes' load meter (10s ticks, 1-minute EWMA)
// with +-20% noise per partition and tick, and the balancer's defaults.
//
// The hot tenant jumps to half the mean load per unit of weight: enough
// to push the node that carries it from the mean to about 1.5x, far past
// the upper band, while one node can still carry it. A tenant at 5x the
// mean node load puts a partition alone at 5x, so the lower bound itself
// becomes 5 and no placement is within any band.
func DefaultConfig() Config {
	return Config{
		Fleets:       []int{10, 50},
		Partitions:   1024,
		Workloads:    []Workload{Keys, Tenants},
		Keys:         1_000_000,
		ZipfS:        0.9,
		Tenants:      5_000,
		TenantMax:    1_000,
		HeavyEvery:   5,
		LoadInterval: 10 * time.Second,
		LoadWindow:   time.Minute,
		Noise:        0.2,
		Converge:     15 * time.Minute,
		Steady:       time.Hour,
		Hot:          0.5,
		HotWindow:    30 * time.Minute,
		Seed:         1,
		Balance:      balance.DefaultConfig(),
		LoadFactor:   1.25,
	}
}

// Validate reports whether c can configure Run. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	for _, n := range c.Fleets {
		if n < 2 {
			return fmt.Errorf("%w: fleet of %d nodes (want at least 2)", ErrInvalidConfig, n)
		}
	}
	for _, w := range c.Workloads {
		if w != Keys && w != Tenants {
			return fmt.Errorf("%w: workload %q", ErrInvalidConfig, w)
		}
	}
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("%w: %d partitions", ErrInvalidConfig, c.Partitions)
	case c.Keys < 1 || c.Tenants < 1 || !(c.TenantMax >= 1) || !(c.ZipfS >= 0):
		return fmt.Errorf("%w: keys %d (s %v), tenants %d (max %v)", ErrInvalidConfig, c.Keys, c.ZipfS, c.Tenants, c.TenantMax)
	case c.HeavyEvery < 1:
		return fmt.Errorf("%w: heavy every %d nodes", ErrInvalidConfig, c.HeavyEvery)
	case c.LoadInterval <= 0 || c.LoadWindow <= 0:
		return fmt.Errorf("%w: load interval %v and window %v must be positive", ErrInvalidConfig, c.LoadInterval, c.LoadWindow)
	case !(c.Noise >= 0 && c.Noise < 1):
		return fmt.Errorf("%w: noise %v must be in [0, 1)", ErrInvalidConfig, c.Noise)
	case c.Converge <= 0 || c.Steady < 0 || c.HotWindow < 0 || !(c.Hot >= 0):
		return fmt.Errorf("%w: converge %v, steady %v, hot %v for %v", ErrInvalidConfig, c.Converge, c.Steady, c.Hot, c.HotWindow)
	case c.Balance.Interval <= 0:
		return fmt.Errorf("%w: balancer interval %v must be positive", ErrInvalidConfig, c.Balance.Interval)
	}
	if err := c.Balance.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}
