package chaos

import (
	"fmt"
	"io"
	"time"
)

// FaultKind is a kind of fault a run injects.
type FaultKind int

const (
	// Pause stops a worker with SIGSTOP, between the read and the write of
	// an increment if one comes within a second, for longer than the TTL
	// and until other workers hold all its partitions, then resumes it
	// with SIGCONT: its write meets a newer epoch's fence.
	Pause FaultKind = iota + 1
	// Kill kills a worker with SIGKILL and starts it again, with the same
	// node ID, after a while.
	Kill
	// LeaderKill kills etcd's leader with SIGKILL (no leadership transfer)
	// and restarts it once the others have elected a new one.
	LeaderKill
	// LeaderFreeze stops etcd's leader with SIGSTOP and resumes it later.
	LeaderFreeze
	// Blackhole cuts a worker's link to etcd for longer than the TTL, then
	// heals it.
	Blackhole
)

// FaultKinds lists every kind, in order.
func FaultKinds() []FaultKind { return []FaultKind{Pause, Kill, LeaderKill, LeaderFreeze, Blackhole} }

// String names the kind.
func (k FaultKind) String() string {
	switch k {
	case Pause:
		return "pause worker"
	case Kill:
		return "kill worker"
	case LeaderKill:
		return "kill etcd leader"
	case LeaderFreeze:
		return "freeze etcd leader"
	case Blackhole:
		return "blackhole worker"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// workerFault reports whether the kind cuts one worker off.
func (k FaultKind) workerFault() bool { return k == Pause || k == Kill || k == Blackhole }

// Config describes a run. Zero fields take DefaultConfig's values.
type Config struct {
	// Seed derives the fault schedule and the load. Zero means 1.
	Seed int64
	// Duration is how long load runs and faults are injected (the run
	// takes longer: start, settling, checks). Default 60s.
	Duration time.Duration
	// Workers is the number of worker processes. Default 5; at least 2.
	Workers int
	// Clients is the number of client goroutines driving load. Default 8.
	Clients int
	// Keys is the number of counter keys; each belongs to one client.
	// Default 32; at least Clients.
	Keys int
	// Partitions of the fleet. Default 64.
	Partitions int
	// TTL of the workers' sessions. Default 2s.
	TTL time.Duration
	// Faults is the number of faults injected, one at a time; the first
	// ones are one of each kind, in an order the seed picks. Default 10.
	Faults int
	// Kinds restricts the faults to these kinds. Empty means all.
	Kinds []FaultKind
	// ReadRatio is the fraction of client operations that read a counter
	// instead of incrementing it. Default 0.1; negative means none.
	ReadRatio float64
	// WorkerBinary is a prebuilt worker command; empty means that Run
	// builds sim/chaos/worker with go build into a temporary directory.
	WorkerBinary string
	// Progress, if not nil, receives a progress line every few seconds
	// and a line per fault.
	Progress io.Writer
	// WorkerLogs, if not nil, receives the workers' standard error (their
	// nodes' logs) and the etcd members' warnings.
	WorkerLogs io.Writer
}

// DefaultConfig returns the configuration of `go run ./sim chaos`.
func DefaultConfig() Config {
	return Config{Seed: 1, Duration: 60 * time.Second, Workers: 5, Clients: 8, Keys: 32, Partitions: 64,
		TTL: 2 * time.Second, Faults: 10, ReadRatio: 0.1}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.Clients == 0 {
		c.Clients = d.Clients
	}
	if c.Keys == 0 {
		c.Keys = max(d.Keys, c.Clients)
	}
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.Faults == 0 {
		c.Faults = d.Faults
	}
	if c.ReadRatio == 0 {
		c.ReadRatio = d.ReadRatio
	}
	if c.ReadRatio < 0 {
		c.ReadRatio = 0
	}
	if len(c.Kinds) == 0 {
		c.Kinds = FaultKinds()
	}
	return c
}

// Validate reports whether c can run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Duration < 0 || c.TTL < 0:
		return fmt.Errorf("%w: duration %v and TTL %v must not be negative", ErrInvalidConfig, c.Duration, c.TTL)
	case c.Workers < 2:
		return fmt.Errorf("%w: workers %d must be at least 2", ErrInvalidConfig, c.Workers)
	case c.Clients < 1 || c.Faults < 0:
		return fmt.Errorf("%w: clients %d must be positive, faults %d not negative", ErrInvalidConfig, c.Clients, c.Faults)
	case c.Keys < c.Clients:
		return fmt.Errorf("%w: keys %d must be at least clients %d", ErrInvalidConfig, c.Keys, c.Clients)
	case c.Partitions < 1:
		return fmt.Errorf("%w: partitions %d must be positive", ErrInvalidConfig, c.Partitions)
	case c.TTL < 2*time.Second:
		return fmt.Errorf("%w: TTL %v must be at least 2s", ErrInvalidConfig, c.TTL)
	case c.ReadRatio > 1:
		return fmt.Errorf("%w: read ratio %v must be at most 1", ErrInvalidConfig, c.ReadRatio)
	}
	for _, k := range c.Kinds {
		if k < Pause || k > Blackhole {
			return fmt.Errorf("%w: unknown fault kind %d", ErrInvalidConfig, int(k))
		}
	}
	return nil
}
