// Package clock is tenure's ground floor for time. The injectable clock is
// github.com/jonboulle/clockwork's Clock: production code runs on
// clockwork.NewRealClock(), tests and the simulator on a clockwork.FakeClock
// that moves only when told. This package adds what every layer needs on top
// of it: timeouts and sleeps measured on the clock.
package clock

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// Real returns the system clock. Its instants carry Go's monotonic clock
// reading, so durations between them are immune to wall-clock steps.
func Real() clockwork.Clock { return real }

var real = clockwork.NewRealClock()

// WithTimeout is context.WithTimeout on clock c: the returned context is
// cancelled d after the call on c's time, when parent is, or when cancel is
// called. cancel must be called to release the timer. On the system clock it
// is context.WithTimeout itself. (clockwork's own WithTimeout ignores a
// parent that ended with DeadlineExceeded; this one does not.)
func WithTimeout(parent context.Context, c clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if c == real {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := c.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.Chan():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Sleep waits d on clock c, or until ctx is done; it reports whether the
// full duration passed.
func Sleep(ctx context.Context, c clockwork.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
