package router

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Backoff describes Client's retries: exponential backoff with jitter,
// bounded in attempts. The zero value of each field selects its documented
// default; DefaultBackoff returns them filled in.
type Backoff struct {
	// MaxAttempts is the most attempts one request gets, the first included.
	// Zero means 10. It must be at least 1 (1 disables retries).
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
	// jitter. Jitter keeps clients that failed together from retrying
	// together.
	Jitter float64
}

// DefaultBackoff returns the default retry policy: up to 10 attempts, delays
// from 5ms doubling up to 1s, half of each delay randomized. The worst case
// spends about 3.3s in delays.
func DefaultBackoff() Backoff { return Backoff{}.withDefaults() }

func (b Backoff) withDefaults() Backoff {
	if b.MaxAttempts == 0 {
		b.MaxAttempts = 10
	}
	if b.Initial == 0 {
		b.Initial = 5 * time.Millisecond
	}
	if b.Max == 0 {
		b.Max = time.Second
	}
	if b.Multiplier == 0 {
		b.Multiplier = 2
	}
	if b.Jitter == 0 {
		b.Jitter = 0.5
	}
	return b
}

// Validate reports whether b, with its defaults applied, is usable. Errors
// wrap ErrInvalidConfig.
func (b Backoff) Validate() error {
	d := b.withDefaults()
	switch {
	case d.MaxAttempts < 1:
		return fmt.Errorf("%w: backoff max attempts %d must be at least 1", ErrInvalidConfig, d.MaxAttempts)
	case d.Initial < 0:
		return fmt.Errorf("%w: backoff initial delay %v must not be negative", ErrInvalidConfig, d.Initial)
	case d.Max < d.Initial:
		return fmt.Errorf("%w: backoff max delay %v must be >= initial delay %v", ErrInvalidConfig, d.Max, d.Initial)
	case math.IsNaN(d.Multiplier) || math.IsInf(d.Multiplier, 0) || d.Multiplier < 1:
		return fmt.Errorf("%w: backoff multiplier %v must be a finite number >= 1", ErrInvalidConfig, d.Multiplier)
	case math.IsNaN(d.Jitter) || d.Jitter < 0 || d.Jitter > 1:
		return fmt.Errorf("%w: backoff jitter %v must be in [0, 1]", ErrInvalidConfig, d.Jitter)
	}
	return nil
}

// Delay returns the delay before retry number retry (1 for the first
// retry), given u, a uniform random number in [0, 1) that places the delay
// within its jitter range. It is a pure function, for tests and for callers
// that drive their own retries; b's zero fields take their defaults.
func (b Backoff) Delay(retry int, u float64) time.Duration {
	b = b.withDefaults()
	if retry < 1 {
		return 0
	}
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(retry-1))
	if d > float64(b.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(b.Max)
	}
	u = min(max(u, 0), 1)
	return time.Duration(d * (1 - b.Jitter*u))
}

// wait sleeps on clock for the delay before retry, or until ctx ends, and
// returns ctx's error in that case.
func (b Backoff) wait(ctx context.Context, clock election.Clock, retry int) error {
	if !election.Sleep(ctx, clock, b.Delay(retry, rand.Float64())) {
		return ctx.Err()
	}
	return nil
}
