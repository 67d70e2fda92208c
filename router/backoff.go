package router

import (
	"fmt"

	"github.com/tenure-go/tenure/internal/retry"
)

// Backoff describes Client's and Do's retries: exponential backoff with
// jitter, bounded in attempts. It is tenure's one retry policy type; the
// zero value of each field selects its documented default (MaxAttempts 10,
// Initial 5ms, Max 1s, Multiplier 2, Jitter 0.5), and DefaultBackoff returns
// them filled in. Delay(retry, u) is the pure delay function.
type Backoff = retry.Policy

// DefaultBackoff returns the default retry policy: up to 10 attempts, delays
// from 5ms doubling up to 1s, half of each delay randomized. The worst case
// spends about 3.3s in delays.
func DefaultBackoff() Backoff { return retry.Request() }

// validateBackoff is Backoff.Validate with the router's sentinel.
func validateBackoff(b Backoff) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: backoff: %w", ErrInvalidConfig, err)
	}
	return nil
}
