package router

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/internal/retry"
)

// Backoff describes the retries of Client.Do and Router.Do (and of
// grpcroute's calls): exponential backoff with jitter, bounded in
// attempts. It is tenure's one retry policy type. The zero value of each
// field selects its documented default, and DefaultBackoff returns them
// filled in. Delay is the pure delay function.
type Backoff struct {
	// MaxAttempts is the most attempts one operation gets, the first
	// included. Zero means 10. It must be at least 1 (1 disables retries).
	MaxAttempts int
	// Initial is the delay before the first retry, before jitter. Zero means
	// 5ms: a move of a partition takes a few etcd round trips.
	Initial time.Duration
	// Max caps the delay before jitter. Zero means 1s.
	Max time.Duration
	// Multiplier scales the delay after each retry. Zero means 2. It must be
	// at least 1.
	Multiplier float64
	// Jitter is the fraction of each delay that is randomized: the delay d
	// becomes a uniform random duration in [d*(1-Jitter), d]. Zero means
	// 0.5; it must be in [0, 1]. Use a tiny positive value to disable
	// jitter. Jitter keeps processes that failed together from retrying
	// together.
	Jitter float64
}

// DefaultBackoff returns the default retry policy: up to 10 attempts, delays
// from 5ms doubling up to 1s, half of each delay randomized. The worst case
// spends about 3.3s in delays.
func DefaultBackoff() Backoff { return Backoff(retry.Request()) }

// withDefaults returns b with its zero fields set to their defaults.
func (b Backoff) withDefaults() Backoff { return Backoff(b.policy().WithDefaults()) }

// Validate reports whether b, with its defaults applied, is usable.
// Errors wrap ErrInvalidBackoff and name the field and its value.
func (b Backoff) Validate() error { return b.policy().Validate(ErrInvalidBackoff) }

// Delay returns the delay before retry number retry (1 for the first
// retry), given u, a uniform random number in [0, 1) that places the delay
// within its jitter range. It is a pure function, for tests and for callers
// that drive their own retries; b's zero fields take their defaults.
func (b Backoff) Delay(retry int, u float64) time.Duration { return b.policy().Delay(retry, u) }

// policy converts b to the type of tenure's retry loop, whose fields are
// Backoff's.
func (b Backoff) policy() retry.Policy { return retry.Policy(b) }

// validateBackoff is Backoff.Validate for a Config's Backoff: its errors
// wrap ErrInvalidConfig as well.
func validateBackoff(b Backoff) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
