package election

import (
	"context"
	"time"
)

// Clock is the source of time of a Session and an Election: the current
// instant, timers and tickers. RealClock reads the system's monotonic clock;
// a simulator supplies a virtual one. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current instant. Instants are only compared with each
	// other and never interpreted as wall-clock time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d.
	NewTicker(d time.Duration) Ticker
}

// Timer is a Clock's one-shot timer, with the semantics of time.Timer.
type Timer interface {
	// C returns the channel on which the timer delivers its firing time.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so.
	Stop() bool
	// Reset changes the timer to fire d from now; it reports whether the
	// timer had been active.
	Reset(d time.Duration) bool
}

// Ticker is a Clock's periodic ticker, with the semantics of time.Ticker.
type Ticker interface {
	// C returns the channel on which ticks are delivered.
	C() <-chan time.Time
	// Stop turns the ticker off.
	Stop()
}

// RealClock returns the system clock. Its instants carry Go's monotonic
// clock reading, so durations between them are immune to wall-clock steps.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// WithTimeout is context.WithTimeout on clock c: the returned context is
// cancelled d after the call on c's time, when parent is, or when cancel is
// called. cancel must be called to release the timer. On RealClock it is
// context.WithTimeout itself.
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancel(parent)
	t := c.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Sleep waits d on clock c, or until ctx is done; it reports whether the full
// duration passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
