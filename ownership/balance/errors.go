package balance

import "errors"

var (
	// ErrInvalidConfig reports a Config that Validate refuses.
	ErrInvalidConfig = errors.New("balance: invalid config")

	// ErrNilArgument reports a nil etcd client or term.
	ErrNilArgument = errors.New("balance: nil argument")

	// ErrDeposed reports a pass refused because the balancer's term no
	// longer stands: another balancer may be acting.
	ErrDeposed = errors.New("balance: the balancer's term ended")

	// ErrStaleSnapshot reports a pass refused because the fleet changed
	// since the snapshot it was computed from: a member joined, left or
	// changed, a drain mark changed, or a placement on one of its
	// partitions was written. The next pass plans again.
	ErrStaleSnapshot = errors.New("balance: the fleet changed since the pass was planned")
)

// ErrSuspended reports a pass not applied because an operator suspended
// the balancer (fleet.Operator.SuspendBalancer), before its snapshot or
// since, or because a resize of the partition count was in progress at
// its snapshot (the balancer pauses until it ends; the message names it).
var ErrSuspended = errors.New("balance: the balancer is suspended")
