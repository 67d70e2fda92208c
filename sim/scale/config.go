package scale

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// Defaults of Config.
const (
	DefaultNodes       = 1000
	DefaultPartitions  = 4096
	DefaultLoadFactor  = 1.25
	DefaultTTL         = 10 * time.Second
	DefaultStep        = 100 * time.Millisecond
	DefaultQuiet       = 5 * time.Millisecond
	DefaultWaitTimeout = 10 * time.Minute
	DefaultRingSamples = 50
	DefaultLoadKeys    = 1_000_000
)

// The load models of the placement figures (Config.LoadModel).
const (
	// LoadZipf is Config.LoadKeys keys, key k of rate 1/k^0.9.
	LoadZipf = "zipf"
	// LoadTenants is 5,000 tenants of sizes spread log-uniformly over 1
	// to 1,000.
	LoadTenants = "tenants"
	// LoadUniform is partition loads spread uniformly over 0.5 to 1.5.
	LoadUniform = "uniform"
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("scale: invalid config")

// ErrUnstable is wrapped by the error Run returns when the fleet does not
// reach a stable ring within Config.WaitTimeout of wall time.
var ErrUnstable = errors.New("scale: ring not stable")

// ErrOverlap is wrapped by the error Run returns when two nodes served one
// partition at once.
var ErrOverlap = errors.New("scale: partition served by two nodes")

// Config sizes a run. The zero value of every field selects its default;
// Run does not modify the caller's Config.
type Config struct {
	// Nodes is the size of the live fleet. Zero means 1000.
	Nodes int
	// Partitions is P for the live fleet. Zero means 4096.
	Partitions int
	// LoadFactor is the ring's load factor, live and ring-only. Zero means
	// 1.25.
	LoadFactor float64
	// Restarts is how many nodes the rolling restart restarts, one at a
	// time, in ID order. Zero means the whole fleet.
	Restarts int
	// RingOnly skips the live fleet: only the ring-only figures are
	// computed.
	RingOnly bool
	// SkipRing skips the ring-only figures.
	SkipRing bool
	// LoadReports, if positive, adds a last live phase: the stable fleet
	// runs this much virtual time with noisy load on every partition, and
	// its etcd writes are the nodes' load reports.
	LoadReports time.Duration
	// Placement computes the placement figures at Nodes x Partitions
	// (PlacementFigures). With RingOnly and SkipRing, nothing else is run.
	Placement bool
	// LoadModel is the load of the placement figures: LoadZipf (""),
	// LoadTenants or LoadUniform.
	LoadModel string
	// LoadKeys is the number of keys whose Zipf-distributed rates load the
	// placement figures' partitions under LoadZipf. Zero means 1,000,000.
	LoadKeys int
	// RingNodes and RingPartitions size the ring-only figures. Zero means
	// 1000 and 4096.
	RingNodes, RingPartitions int
	// RingAlgorithm is the ring algorithm of the live fleet
	// (ring.AlgorithmWeighted or ring.AlgorithmBounded); zero means
	// ring.AlgorithmWeighted, a new fleet's.
	RingAlgorithm ring.Algorithm
	// RingBoth computes the ring-only figures of both ring algorithms,
	// side by side on the same samples.
	RingBoth bool
	// RingHeavy, if positive, gives every RingHeavy-th node and joiner of
	// the ring-only figures capacity weight 2 (10: a tenth of them).
	RingHeavy int
	// RingSamples is how many joins and how many leaves the ring-only
	// figures sample. Zero means 50.
	RingSamples int
	// TTL is the nodes' session TTL. Zero means 10s.
	TTL time.Duration
	// Step is how far the driver advances the virtual clock at a time.
	// Zero means 100ms; it is also the resolution of the virtual times
	// reported.
	Step time.Duration
	// Quiet is how long (wall time) the fleet must show no activity before
	// the driver considers it quiescent. Zero means 5ms.
	Quiet time.Duration
	// WaitTimeout bounds (wall time) each wait for a stable ring. Zero
	// means 10 minutes.
	WaitTimeout time.Duration
	// Seed seeds the ring-only samples. Zero is a valid seed.
	Seed uint64
	// Progress, if set, receives a line per step of the run.
	Progress io.Writer
}

// DefaultConfig returns the defaults: 1000 nodes x 4096 partitions, load
// factor 1.25, a rolling restart of the whole fleet, ring-only figures at
// 1000 x 4096 over 50 samples, TTL 10s, steps of 100ms of virtual time
// after 5ms of quiet, 10 minutes per wait.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Nodes, DefaultNodes)
	def(&c.Partitions, DefaultPartitions)
	def(&c.RingNodes, DefaultNodes)
	def(&c.RingPartitions, DefaultPartitions)
	def(&c.RingSamples, DefaultRingSamples)
	def(&c.LoadKeys, DefaultLoadKeys)
	if c.LoadModel == "" {
		c.LoadModel = LoadZipf
	}
	if c.LoadFactor == 0 {
		c.LoadFactor = DefaultLoadFactor
	}
	if c.Restarts == 0 || c.Restarts > c.Nodes {
		c.Restarts = c.Nodes
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Step == 0 {
		c.Step = DefaultStep
	}
	if c.Quiet == 0 {
		c.Quiet = DefaultQuiet
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	return c
}

// Validate reports whether c can configure a run. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 0 || c.Partitions < 0 || c.RingNodes < 0 || c.RingPartitions < 0:
		return fmt.Errorf("%w: sizes must not be negative (nodes %d, partitions %d, ring nodes %d, ring partitions %d)",
			ErrInvalidConfig, c.Nodes, c.Partitions, c.RingNodes, c.RingPartitions)
	case c.Nodes == 1 && !c.RingOnly:
		return fmt.Errorf("%w: a live fleet of 1 node cannot lose one (nodes must be >= 2)", ErrInvalidConfig)
	case c.Restarts < 0 || c.RingSamples < 0 || c.RingHeavy < 0 || c.LoadKeys < 0:
		return fmt.Errorf("%w: restarts %d, ring samples %d, ring heavy %d and load keys %d must not be negative",
			ErrInvalidConfig, c.Restarts, c.RingSamples, c.RingHeavy, c.LoadKeys)
	case c.LoadModel != "" && c.LoadModel != LoadZipf && c.LoadModel != LoadTenants && c.LoadModel != LoadUniform:
		return fmt.Errorf("%w: load model %q (must be %s, %s or %s)", ErrInvalidConfig, c.LoadModel, LoadZipf, LoadTenants, LoadUniform)
	case c.TTL < 0 || c.Step < 0 || c.Quiet < 0 || c.WaitTimeout < 0 || c.LoadReports < 0:
		return fmt.Errorf("%w: durations must not be negative (TTL %v, step %v, quiet %v, wait timeout %v)",
			ErrInvalidConfig, c.TTL, c.Step, c.Quiet, c.WaitTimeout)
	case c.TTL > 0 && c.Step > 0 && c.Step >= c.TTL/3:
		return fmt.Errorf("%w: step %v must be < TTL/3 (TTL %v), or sessions miss renewals", ErrInvalidConfig, c.Step, c.TTL)
	}
	d := c.withDefaults()
	for _, rc := range []ring.Config{
		{Partitions: d.Partitions, LoadFactor: d.LoadFactor, Algorithm: d.RingAlgorithm},
		{Partitions: d.RingPartitions, LoadFactor: d.LoadFactor, Algorithm: d.RingAlgorithm},
	} {
		if err := rc.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}
