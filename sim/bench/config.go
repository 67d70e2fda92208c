package bench

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("bench: invalid config")

// Config sizes a run. The zero value of a field selects its default;
// Run does not modify the caller's Config.
type Config struct {
	// Rounds is how many interleaved rounds each comparison runs. Zero
	// means 5 (the failover comparisons too, whose crash rounds each wait
	// for a lease to expire).
	Rounds int
	// Quick shrinks every measurement (fewer operations per round, 2
	// rounds, fewer ring samples) for a fast smoke run. The rows are the
	// same.
	Quick bool
	// Only, if not empty, runs only the named comparisons: lookup, put,
	// group, routed, failover, rolling, ring.
	Only []string
	// RedisServer is the redis-server executable. Empty means
	// "redis-server" on PATH; if none is found the Redis rows are skipped.
	RedisServer string
	// Progress, if set, receives a line per step.
	Progress io.Writer
}

// Comparisons lists the comparisons in report order.
var Comparisons = []string{"lookup", "put", "group", "routed", "failover", "rolling", "ring"}

// Validate reports a negative round count or an unknown comparison.
func (c Config) Validate() error {
	if c.Rounds < 0 {
		return fmt.Errorf("%w: rounds %d must not be negative", ErrInvalidConfig, c.Rounds)
	}
	for _, o := range c.Only {
		known := false
		for _, k := range Comparisons {
			known = known || o == k
		}
		if !known {
			return fmt.Errorf("%w: unknown comparison %q (known: %v)", ErrInvalidConfig, o, Comparisons)
		}
	}
	return nil
}

func (c Config) rounds() int {
	switch {
	case c.Rounds > 0:
		return c.Rounds
	case c.Quick:
		return 2
	}
	return 5
}

// failoverRounds is the rounds of the failover comparisons.
func (c Config) failoverRounds() int {
	switch {
	case c.Rounds > 0:
		return c.Rounds
	case c.Quick:
		return 1
	}
	return 5
}

func (c Config) runs(name string) bool {
	if len(c.Only) == 0 {
		return true
	}
	for _, o := range c.Only {
		if o == name {
			return true
		}
	}
	return false
}

// scaled returns full, or quick in a quick run.
func (c Config) scaled(full, quick int) int {
	if c.Quick {
		return quick
	}
	return full
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}
