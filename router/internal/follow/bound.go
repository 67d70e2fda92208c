package follow

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Bound is how long one attempt of a client's call waits for its answer
// before it is cut off and sent again: the one rule behind the SessionTTL
// and AttemptTimeout fields of router.ClientConfig and
// grpcroute.ClientConfig, whose documentation states it to users.
//
// Why SessionTTL/2 by default: an owner that does not answer may be
// paused (GC, SIGSTOP, VM migration) or cut off from etcd. Its lease then
// expires at most SessionTTL after it stopped renewing, its claims go
// with it, and the next owner claims them within a few etcd round trips.
// Until then the fleet still names the silent owner, so a retry can only
// go back to it; from then on a retry reaches the new owner. With
// attempts of TTL/k, a call sent to a paused owner is answered about
// TTL + TTL/k after the pause began at worst (without a bound, only when
// the pause ends), at the cost of about k copies queued at the paused
// owner, which refuses them when it wakes without its session. k = 2
// bounds the wait at about 1.5 TTL with two or three copies, and gives a
// healthy owner half a TTL to start answering before a copy is sent.
type Bound struct {
	// SessionTTL is the lease TTL of the fleet's nodes. Zero means
	// election.DefaultTTL, the nodes' default; it must be at least
	// election.MinTTL.
	SessionTTL time.Duration
	// AttemptTimeout is the bound on one attempt. Zero means
	// SessionTTL/2; negative means no bound but the call's context.
	AttemptTimeout time.Duration
}

// WithDefaults returns b with its zero fields set to their defaults.
func (b Bound) WithDefaults() Bound {
	if b.SessionTTL == 0 {
		b.SessionTTL = election.DefaultTTL
	}
	if b.AttemptTimeout == 0 {
		b.AttemptTimeout = b.SessionTTL / 2
	}
	return b
}

// Validate reports whether b, with its defaults applied, can bound a
// client's attempts. Its errors name the field and its value; the
// client's config wraps them in its own ErrInvalidConfig.
func (b Bound) Validate() error {
	d := b.WithDefaults()
	if d.SessionTTL < election.MinTTL {
		return fmt.Errorf("session TTL %v must be at least %v (a fleet's nodes take no shorter one)", d.SessionTTL, election.MinTTL)
	}
	return nil
}

// AttemptTimeoutError is the error of an attempt cut off by its Bound:
// errors.Is(err, Err) and errors.Is(err, context.DeadlineExceeded) hold,
// as for an http.Client's Timeout.
type AttemptTimeoutError struct {
	// Err is the sentinel users test for: router.ErrAttemptTimeout.
	Err error
	// Client names the client that cut it off in the message: "router"
	// or "grpcroute".
	Client string
	// Addr is the address of the node the attempt went to.
	Addr string
	// Bound is the client's bound, with its defaults applied.
	Bound Bound
}

func (e *AttemptTimeoutError) Error() string {
	return fmt.Sprintf("%s: %s did not answer within %v (AttemptTimeout; the fleet's session TTL is %v)",
		e.Client, e.Addr, e.Bound.AttemptTimeout, e.Bound.SessionTTL)
}

func (e *AttemptTimeoutError) Unwrap() []error {
	return []error{e.Err, context.DeadlineExceeded}
}
