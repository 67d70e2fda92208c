package balance

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/keys"
)

// Config configures a Balancer and a Plan.
type Config struct {
	// Cluster selects the fleet's key prefix "/tenure/<Cluster>/"; Prefix,
	// if set, is used instead. One of them is required by NewBalancer.
	Cluster string
	Prefix  string
	// Upper and Lower are the bands, as multiples of the mean load per
	// weight: a pass is triggered by a member above Upper or below Lower
	// (by more than its noise, see NoiseMargin) and evens out to the
	// bands' middles (see Plan). Defaults 1.07 and 0.9: a member that
	// reads past Upper only by its noise is not moved, so a member is left
	// anywhere below Upper plus its noise; at 1.07 with the default noise
	// margin every fleet sim/placement measured (seeds 1-8) settles within
	// the 1.10 goal, or within 5% of the bound its heaviest partition
	// sets, and gets back within it after a hot tenant; at 1.10 members
	// made of one heavy partition were left at up to 1.15. Upper must be
	// > 1 > Lower >= 0.
	Upper, Lower float64
	// NoiseMargin is the relative error allowed for each partition's
	// reported load: a member triggers a pass only when its load per
	// weight is beyond a band by more than NoiseMargin times the root of
	// the sum of its partitions' squared loads, per weight (see Plan).
	// Zero means 0.1: about three standard errors of a partition's load
	// as the nodes report it in sim/placement (+-20% noise per 10s tick
	// through the 1-minute EWMA reads within about 3.3%). There, with the
	// bands at 1.07/0.9, fleets of 10 and 50 nodes under Zipf and tenant
	// loads make 0 moves per hour at steady state (seeds 1-8, 3 hours
	// each); without a margin, or at 0.05, the 50-node fleets made 1-6
	// moves per hour, from members whose load is mostly one heavy
	// partition reading up and down across the band. Negative means none
	// (the bands' edges alone trigger).
	NoiseMargin float64
	// Budget is the most partitions one pass moves, as a fraction of the
	// partitions (at least 1 a pass). Default 0.01; it must be in (0, 1].
	// A Balancer's pass makes at most 46 moves whatever the fraction, so
	// that it fits one etcd transaction (etcd's default --max-txn-ops).
	Budget float64
	// Cooldown is how long a partition the balancer moved is left where it
	// is, from the time its move records (by the clock of the balancer
	// that wrote it). Default 1 minute; negative is invalid.
	Cooldown time.Duration
	// Interval is the time between passes of Run. Default 30s.
	Interval time.Duration
	// Logger receives the balancer's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Clock times the passes and the cooldown. Nil means the system clock.
	Clock clockwork.Clock
	// Metrics, if set, receives the balancer's metrics (see Balancer).
	Metrics prometheus.Registerer
	// TracerProvider, if set, receives a span for each pass of Run (see
	// trace.go). Nil means no spans (never the global provider).
	TracerProvider trace.TracerProvider
}

// defaultNoiseMargin is Config.NoiseMargin's default (see there why 0.1).
const defaultNoiseMargin = 0.1

// DefaultConfig returns the defaults: bands 1.07 and 0.9, a noise margin
// of 0.1, 1% of the partitions per pass, a 1-minute cooldown, a pass
// every 30s.
func DefaultConfig() Config {
	return Config{Upper: 1.07, Lower: 0.9, NoiseMargin: defaultNoiseMargin, Budget: 0.01, Cooldown: time.Minute, Interval: 30 * time.Second}
}

// noiseMargin is the noise margin Plan applies.
func (c Config) noiseMargin() float64 {
	switch {
	case c.NoiseMargin == 0:
		return defaultNoiseMargin
	case c.NoiseMargin < 0:
		return 0
	}
	return c.NoiseMargin
}

// Validate reports whether c can configure a Plan. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Upper) || math.IsNaN(c.Lower) || !(c.Upper > 1) || !(c.Lower < 1) || c.Lower < 0 || math.IsInf(c.Upper, 0):
		return fmt.Errorf("%w: bands upper %v and lower %v must satisfy upper > 1 > lower >= 0", ErrInvalidConfig, c.Upper, c.Lower)
	case math.IsNaN(c.NoiseMargin) || math.IsInf(c.NoiseMargin, 0):
		return fmt.Errorf("%w: noise margin %v must be a number", ErrInvalidConfig, c.NoiseMargin)
	case !(c.Budget > 0 && c.Budget <= 1):
		return fmt.Errorf("%w: budget %v must be in (0, 1]", ErrInvalidConfig, c.Budget)
	case c.Cooldown < 0 || c.Interval < 0:
		return fmt.Errorf("%w: cooldown %v and interval %v must not be negative", ErrInvalidConfig, c.Cooldown, c.Interval)
	}
	return nil
}

// validateFleet checks the fleet's name.
func (c Config) validateFleet() error {
	if err := keys.CheckFleet(c.Cluster, c.Prefix); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}
