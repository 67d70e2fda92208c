package fleet

import "errors"

var (
	// ErrInvalidConfig reports an ObserverConfig or OperatorConfig that
	// cannot be used, or an operator action with an invalid argument. The
	// message names the offending field and value.
	ErrInvalidConfig = errors.New("fleet: invalid config")

	// ErrNilArgument reports a nil etcd client passed to Observe or
	// NewOperator, or an interface holding a nil pointer (such as a nil
	// *clientv3.Client).
	ErrNilArgument = errors.New("fleet: nil argument")

	// ErrClosed reports an operation on an Observer that has been closed.
	ErrClosed = errors.New("fleet: observer closed")

	// ErrPartitionMismatch reports that claims exist for partitions outside
	// [0, P): the partition count of an Observer (or a router Client)
	// differs from the fleet's, and routing would be wrong.
	ErrPartitionMismatch = errors.New("fleet: partition count does not match the fleet")

	// ErrNoSpec reports a fleet whose spec is not in etcd yet: no node has
	// joined it.
	ErrNoSpec = errors.New("fleet: the fleet has no spec yet")

	// ErrInvalidPartition reports a partition number outside [0, P), given
	// to ownership.Node.HoldPartition or Operator.ForceRelease.
	ErrInvalidPartition = errors.New("fleet: invalid partition")
)

var (
	// ErrNoReason reports an operator action that needs a reason (force
	// release, drain) given without one.
	ErrNoReason = errors.New("fleet: operator action needs a reason")

	// ErrNoActor reports an operator action given without an actor: every
	// audit record says who acted.
	ErrNoActor = errors.New("fleet: operator action needs an actor")

	// ErrNotHeld reports a force release of a partition or election that
	// nobody holds.
	ErrNotHeld = errors.New("fleet: nothing holds it")

	// ErrEpochChanged reports a guarded force release that found a holder
	// at another epoch than the one given: it released nothing.
	ErrEpochChanged = errors.New("fleet: holder's epoch changed")

	// ErrNotMember reports a drain of a node that is not a member.
	ErrNotMember = errors.New("fleet: not a member")

	// ErrNotDrained reports an undrain of a node that is not drained.
	ErrNotDrained = errors.New("fleet: node not drained")
)

// ErrNotPinned reports an unpin of a partition that has no pin (none, or a
// balancer's move), or whose pin changed meanwhile.
var ErrNotPinned = errors.New("fleet: partition not pinned")

// ErrNotSuspended reports a resume of a balancer that is not suspended.
var ErrNotSuspended = errors.New("fleet: balancer not suspended")
