package simulation

import (
	"fmt"
	"time"
)

// Strategy names what runs the workload.
type Strategy string

// The strategies.
const (
	// Tenure: ownership nodes with an etcdfence.Store as Fencer; writes
	// routed to the owner and fenced by the partition's token.
	Tenure Strategy = "tenure"
	// TenureUnfenced is Tenure without Fencers and with an unfenced store
	// (the protection switched off), for the regression corpus and to show
	// what fencing buys.
	TenureUnfenced Strategy = "tenure-unfenced"
	// RedisLock takes a per-operation TTL lock (SET NX PX, compare-and-delete
	// unlock) on a simulated Redis and writes an unfenced store.
	RedisLock Strategy = "redislock"
	// EtcdMutex takes etcd's concurrency.Mutex per operation and writes an
	// unfenced store.
	EtcdMutex Strategy = "etcdmutex"
)

// Strategies lists every strategy, tenure first.
func Strategies() []Strategy { return []Strategy{Tenure, RedisLock, EtcdMutex, TenureUnfenced} }

// ParseStrategy returns the strategy named s.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w: unknown strategy %q", ErrInvalidConfig, s)
}

// Config configures one run. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Seed     uint64
	Strategy Strategy
	// Nodes, Partitions, Keys and Clients size the fleet and workload.
	Nodes, Partitions, Keys, Clients int
	// TTL is the lease TTL (sessions, locks).
	TTL time.Duration
	// Duration is the virtual length of the workload; faults are injected
	// in its first FaultFraction and healed by then.
	Duration      time.Duration
	FaultFraction float64
	// Faults is how many faults the schedule holds.
	Faults int
	// FloorRaises is how many RaiseFloor faults the schedule of a tenure
	// strategy holds besides Faults: a writer outside the fleet raising a
	// partition's fence floor. Zero means 2; negative means none.
	FloorRaises int
	// Reshapes is how many shape changes of the fleet (Resize and Migrate
	// entries: resizes of the partition count, migrations of the ring
	// algorithm) the schedule of a tenure strategy holds besides Faults.
	// Zero means 2; negative means none.
	Reshapes int
	// SuccessorKills is how many KillSuccessor faults the schedule of a
	// tenure strategy holds besides Faults: a planned move's successor
	// stopped in the middle of the hand-over of its claim. Zero means 1;
	// negative means none.
	SuccessorKills int
	// Step is how far the driver moves the virtual clock at a time and
	// Yield the real time it sleeps between steps (zero: none; the
	// scheduler yields of Spins suffice on an idle machine).
	Step, Yield time.Duration
	// Spins is how many times the driver yields the processor
	// (runtime.Gosched) between steps, before it sleeps Yield.
	Spins int
	// MaxSkew bounds each node's clock rate error (0.05: 5% fast or slow).
	MaxSkew float64
	// LivenessSlack is what the liveness bound allows beyond the TTL: see
	// LivenessBound.
	LivenessSlack time.Duration
}

// DefaultConfig is the configuration of the tests and of `go run ./sim`.
func DefaultConfig() Config {
	return Config{
		Strategy:       Tenure,
		Nodes:          4,
		Partitions:     16,
		Keys:           12,
		Clients:        6,
		TTL:            2 * time.Second,
		Duration:       20 * time.Second,
		FaultFraction:  0.7,
		Faults:         8,
		FloorRaises:    2,
		Reshapes:       2,
		SuccessorKills: 1,
		Step:           10 * time.Millisecond,
		Yield:          50 * time.Microsecond,
		Spins:          8,
		MaxSkew:        0.05,
		LivenessSlack:  3 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Strategy == "" {
		c.Strategy = d.Strategy
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.Keys == 0 {
		c.Keys = d.Keys
	}
	if c.Clients == 0 {
		c.Clients = d.Clients
	}
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.FaultFraction == 0 {
		c.FaultFraction = d.FaultFraction
	}
	if c.Faults == 0 {
		c.Faults = d.Faults
	}
	if c.FloorRaises == 0 {
		c.FloorRaises = d.FloorRaises
	}
	if c.Reshapes == 0 {
		c.Reshapes = d.Reshapes
	}
	if c.SuccessorKills == 0 {
		c.SuccessorKills = d.SuccessorKills
	}
	if c.Step == 0 {
		c.Step = d.Step
	}
	if c.Spins == 0 {
		c.Spins = d.Spins
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = d.MaxSkew
	}
	if c.LivenessSlack == 0 {
		c.LivenessSlack = d.LivenessSlack
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := ParseStrategy(string(c.Strategy)); err != nil {
		return err
	}
	switch {
	case c.Nodes < 2:
		return fmt.Errorf("%w: %d nodes, need at least 2", ErrInvalidConfig, c.Nodes)
	case c.Partitions < 1 || c.Keys < 1 || c.Clients < 1:
		return fmt.Errorf("%w: partitions %d, keys %d and clients %d must be positive", ErrInvalidConfig, c.Partitions, c.Keys, c.Clients)
	case c.TTL < 2*time.Second:
		return fmt.Errorf("%w: TTL %v below etcd's minimum 2s", ErrInvalidConfig, c.TTL)
	case c.FaultFraction <= 0 || c.FaultFraction >= 1:
		return fmt.Errorf("%w: fault fraction %v must be in (0, 1)", ErrInvalidConfig, c.FaultFraction)
	case c.MaxSkew < 0 || c.MaxSkew >= 0.2:
		return fmt.Errorf("%w: clock skew %v must be in [0, 0.2)", ErrInvalidConfig, c.MaxSkew)
	case c.Faults < 0:
		return fmt.Errorf("%w: %d faults", ErrInvalidConfig, c.Faults)
	}
	return nil
}

// LivenessBound is how long, after the last fault healed, a partition may
// stay unowned: TTL (the longest a lease may outlive the fault that killed
// its holder: its last renewal can land just before the heal, and a leader
// change restarts the countdown) plus LivenessSlack (etcd's election
// timeout added by a leader change, 1s; the drain timeout a hung release
// callback may cost a planned handoff; the claim's round trips).
func (c Config) LivenessBound() time.Duration {
	c = c.withDefaults()
	return c.TTL + c.LivenessSlack
}
