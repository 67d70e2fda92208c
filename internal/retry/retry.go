// Package retry holds tenure's one retry loop (Do) and its one policy
// type: exponential backoff with jitter, bounded in attempts or not, on an
// injected clock. The named policies (Background, Node, Rejoin, Request)
// are the figures of each kind of retry. Users configure retries with
// router.Backoff, whose fields are Policy's: router and grpcroute convert
// it to a Policy.
package retry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/internal/clock"
)

// Policy describes retries: exponential backoff with jitter, bounded in
// attempts. The zero value of each field selects its documented default.
type Policy struct {
	// MaxAttempts is the most attempts one operation gets, the first
	// included. Zero means 10. It must be at least 1 (1 disables retries);
	// Unbounded retries until the caller stops.
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

// Unbounded is the MaxAttempts of a policy that retries until its caller
// stops it (its context ends).
const Unbounded = math.MaxInt

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 10
	}
	if p.Initial == 0 {
		p.Initial = 5 * time.Millisecond
	}
	if p.Max == 0 {
		p.Max = time.Second
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	if p.Jitter == 0 {
		p.Jitter = 0.5
	}
	return p
}

// Validate reports whether p, with its defaults applied, is usable. Errors
// wrap invalid, the caller's sentinel, and name the field and its value.
func (p Policy) Validate(invalid error) error {
	d := p.WithDefaults()
	switch {
	case d.MaxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d must be at least 1", invalid, d.MaxAttempts)
	case d.Initial < 0:
		return fmt.Errorf("%w: initial delay %v must not be negative", invalid, d.Initial)
	case d.Max < d.Initial:
		return fmt.Errorf("%w: max delay %v must be >= initial delay %v", invalid, d.Max, d.Initial)
	case math.IsNaN(d.Multiplier) || math.IsInf(d.Multiplier, 0) || d.Multiplier < 1:
		return fmt.Errorf("%w: multiplier %v must be a finite number >= 1", invalid, d.Multiplier)
	case math.IsNaN(d.Jitter) || d.Jitter < 0 || d.Jitter > 1:
		return fmt.Errorf("%w: jitter %v must be in [0, 1]", invalid, d.Jitter)
	}
	return nil
}

// Delay returns the delay before retry number retry (1 for the first
// retry), given u, a uniform random number in [0, 1) that places the delay
// within its jitter range. It is a pure function, for tests and for callers
// that drive their own retries; p's zero fields take their defaults.
func (p Policy) Delay(retry int, u float64) time.Duration {
	p = p.WithDefaults()
	if retry < 1 {
		return 0
	}
	d := float64(p.Initial) * math.Pow(p.Multiplier, float64(retry-1))
	if d > float64(p.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(p.Max)
	}
	u = min(max(u, 0), 1)
	return time.Duration(d * (1 - p.Jitter*u))
}

// Next returns the delay before retry number retry with a random place in
// the jitter range.
func (p Policy) Next(retry int) time.Duration { return p.Delay(retry, rand.Float64()) }

// Wait sleeps on c for the delay before retry, or until ctx ends, and
// returns ctx's error in that case.
func (p Policy) Wait(ctx context.Context, c clockwork.Clock, retry int) error {
	if !clock.Sleep(ctx, c, p.Next(retry)) {
		return ctx.Err()
	}
	return nil
}
