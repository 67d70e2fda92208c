package fleet

import "errors"

var (
	// ErrInvalidConfig reports an ObserverConfig or OperatorConfig that
	// cannot be used, or an operator action with an invalid argument: no
	// actor (every audit record says who acted), no reason where the action
	// needs one, a negative epoch, a scope that names neither a partition
	// nor an election. The message names the offending field and value.
	ErrInvalidConfig = errors.New("fleet: invalid config")

	// ErrNilArgument reports a nil etcd client passed to Observe or
	// NewOperator, or an interface holding a nil pointer (such as a nil
	// *clientv3.Client).
	ErrNilArgument = errors.New("fleet: nil argument")

	// ErrClosed reports an operation on an Observer that has been closed.
	ErrClosed = errors.New("fleet: observer closed")

	// ErrNoSpec reports a fleet whose spec is not in etcd yet: no node has
	// joined it.
	ErrNoSpec = errors.New("fleet: the fleet has no spec yet")

	// ErrInvalidPartition reports a partition number outside [0, P), given
	// to ownership.Node.HoldPartition or to an operator action.
	ErrInvalidPartition = errors.New("fleet: invalid partition")

	// ErrNoSpace reports that etcd refuses puts because its database is
	// full: the NOSPACE alarm stands. Nothing that needs a put can be done
	// until an operator frees space and disarms the alarm (see the README's
	// operating section); a node keeps serving the partitions it holds
	// meanwhile, and an operator action or a balancer pass is refused whole.
	ErrNoSpace = errors.New("fleet: etcd database full (NOSPACE alarm)")
)

// ErrNotFound reports an operator action whose target is not in etcd, or
// no longer: a force release of a tenure that has ended (nothing holds the
// scope, or a holder at another epoch than the one given, which the
// message names: the release released nothing), a drain or pin to a node
// that is not a member, an undrain of a node that is not drained, an unpin
// of a partition that has no pin (none, a balancer's move, or a pin that
// changed meanwhile), a resume of a balancer that is not suspended. The
// message says which.
var ErrNotFound = errors.New("fleet: not found")
