package balance

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/clock"
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
	// and evens out to the bands' middles (see Plan). Defaults 1.10 and
	// 0.9: with Upper at Cadence's 1.15 a fleet is left anywhere below
	// 1.15, and sim/placement measured steady states up to 1.114, above
	// the 1.10 goal; at 1.10 every fleet it measured settles within 1.10,
	// or within 5% of the bound its heaviest partition sets. Upper must
	// be > 1 > Lower >= 0.
	Upper, Lower float64
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
	Clock clock.Clock
	// Metrics, if set, receives the balancer's metrics (see Balancer).
	Metrics prometheus.Registerer
}

// DefaultConfig returns the defaults: bands 1.10 and 0.9, 1% of the
// partitions per pass, a 1-minute cooldown, a pass every 30s.
func DefaultConfig() Config {
	return Config{Upper: 1.10, Lower: 0.9, Budget: 0.01, Cooldown: time.Minute, Interval: 30 * time.Second}
}

// Validate reports whether c can configure a Plan. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Upper) || math.IsNaN(c.Lower) || !(c.Upper > 1) || !(c.Lower < 1) || c.Lower < 0 || math.IsInf(c.Upper, 0):
		return fmt.Errorf("%w: bands upper %v and lower %v must satisfy upper > 1 > lower >= 0", ErrInvalidConfig, c.Upper, c.Lower)
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
