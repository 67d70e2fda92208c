package ownership

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/tenure-go/tenure/ownership/fleet"
)

var (
	// ErrInvalidConfig reports a Config that Join cannot use. The message
	// names the offending field and value. Invalid node IDs, partition counts
	// and load factors are reported with the ring package's sentinels
	// (ring.ErrInvalidNodeID, ErrInvalidPartitions, ErrInvalidLoadFactor), which
	// errors.Is also matches against ErrInvalidConfig when returned by
	// Config.Validate.
	ErrInvalidConfig = errors.New("ownership: invalid config")

	// ErrNilArgument reports a nil argument, or an interface holding a nil
	// pointer (such as a nil *clientv3.Client): an etcd client or a
	// context passed to Join, Observe, NewOperator or Close.
	ErrNilArgument = errors.New("ownership: nil argument")

	// ErrDuplicateMember reports that another live process is registered
	// under the same node ID. The error is a *DuplicateMemberError.
	ErrDuplicateMember = errors.New("ownership: duplicate member")

	// ErrNotOwner reports that this node does not serve the partition asked
	// for: another node owns it, nobody does yet, or this node is still
	// acquiring it. The error is a *WrongOwnerError that names the owner
	// when it is known.
	ErrNotOwner = errors.New("ownership: not the owner")

	// ErrRewound reports that etcd's revisions went backwards, as after
	// etcd was restored from a snapshot: a store refused a partition's new
	// epoch because its floor is above both the epoch etcd just issued and
	// etcd's current revision, so the floor records an epoch this etcd
	// has not issued yet. The error is a *RewindError.
	ErrRewound = errors.New("ownership: etcd revisions went backwards (restored from a snapshot?)")

	// ErrReleasing reports that the partition is being handed off: this node
	// still holds its claim but admits no new work for it. The error is a
	// *WrongOwnerError naming the next owner when it is known;
	// errors.Is(err, ErrNotOwner) holds as well.
	ErrReleasing = errors.New("ownership: partition is being released")

	// ErrClosed reports an operation on a Node that has been closed. It is
	// also the cause of the contexts of partitions released by Close.
	ErrClosed = errors.New("ownership: node closed")

	// ErrMoved is the cause (context.Cause) of a partition's context when its
	// tenure ended because the ring moved the partition to another node.
	ErrMoved = errors.New("ownership: partition moved")

	// ErrLost is the cause (context.Cause) of a partition's context when its
	// tenure ended without a handoff: the node's Session ended, its safe
	// deadline passed, or its claim disappeared from etcd. A
	// *WrongOwnerError from Hold whose SessionLost is set matches it too.
	ErrLost = errors.New("ownership: partition lost")

	// ErrMoveCalledOff is the cause (context.Cause) of a preparation's
	// context (Callbacks.OnPrepare) when the partition is not coming to
	// this node after all: the ring gives it to another node again, or
	// another claim than the one prepared for took its place.
	ErrMoveCalledOff = errors.New("ownership: move called off")

	// ErrMoveCompleted is the cause (context.Cause) of a preparation's
	// context (Callbacks.OnPrepare) once the holder's claim is gone and
	// this node claims the partition: the preparation is over, used if
	// OnPrepare had returned, discarded if not.
	ErrMoveCompleted = errors.New("ownership: move completed")

	// ErrClientClosed reports that the node's etcd client was closed while
	// the node was running. The node cannot rejoin through a closed client,
	// so it stops as if killed: its partitions were reported lost, Done is
	// closed, and Close returns an error wrapping ErrClientClosed. Its claims
	// and member key go when its lease expires. Close the node before its
	// client to leave gracefully.
	//
	// router.NewClient reports it too, for an etcd client that is closed
	// or closed before the fleet was read.
	ErrClientClosed = errors.New("ownership: etcd client closed")

	// ErrNoOwner reports that no owner with an address is known for a
	// partition, typically in the middle of a handoff or while the fleet is
	// empty. It is a *WrongOwnerError whose Owner or Addr is empty, so
	// errors.Is(err, ErrNotOwner) holds as well.
	ErrNoOwner = errors.New("ownership: no owner known")
)

// DuplicateMemberError reports that node ID is already registered by a
// process whose lease is alive. errors.Is(err, ErrDuplicateMember) holds.
type DuplicateMemberError struct {
	// ID is the node ID that is taken.
	ID string
	// Lease is the etcd lease (hexadecimal in the message) of the process
	// that holds the ID.
	Lease int64
}

// Error implements error.
func (e *DuplicateMemberError) Error() string {
	return fmt.Sprintf("ownership: duplicate member: node ID %q is held by a live process (lease %x)", e.ID, e.Lease)
}

// Is reports whether target is ErrDuplicateMember.
func (e *DuplicateMemberError) Is(target error) bool { return target == ErrDuplicateMember }

// WrongOwnerError reports that the partition is not served here: it is
// returned by Hold when this node does not serve the partition, by the
// router for work it neither runs nor forwards, and decoded from a router's
// wrong-owner answer. It carries what a caller needs next: where to send the
// work, and whether waiting here is worth it. errors.Is(err, ErrNotOwner)
// always holds; errors.Is(err, ErrReleasing) holds when Releasing is set,
// errors.Is(err, ErrLost) when SessionLost is set, and
// errors.Is(err, ErrNoOwner) when Owner or Addr is empty.
type WrongOwnerError struct {
	// Route is the hint: the partition asked for and where its work goes.
	// Its Owner is the node that owns the partition or is about to: when
	// Releasing, the next owner on the ring; otherwise the holder of the
	// partition's claim, or its owner on the ring if nobody holds a claim.
	// Owner is empty if unknown, Addr is Owner's advertised address (empty
	// if unknown), Epoch the epoch of Owner's claim (0 if Owner holds no
	// claim yet) and RingVersion the Version of the ring the answering node
	// routed with (0 if unknown).
	fleet.Route
	// Releasing reports that this node is handing the partition off.
	Releasing bool
	// SessionLost reports that the answering node's session ended (its
	// lease was lost or its safe deadline passed) and that it is rejoining:
	// it serves nothing until it has, and Owner names the partition's other
	// known holder, never the answering node. errors.Is(err, ErrLost) holds.
	SessionLost bool
	// Acquiring reports that this node is the partition's next owner on the
	// ring and is still acquiring it: claiming it, advancing its fencers,
	// waiting for its OnAcquired to return, or waiting for the previous
	// owner's handoff. Work for the partition will be admitted here
	// shortly.
	Acquiring bool
}

// Error implements error.
func (e *WrongOwnerError) Error() string {
	var b []byte
	switch {
	case e.SessionLost:
		b = append(b, "ownership: session lost, rejoining: partition "...)
	case e.Releasing:
		b = append(b, "ownership: partition is being released: partition "...)
	default:
		b = append(b, "ownership: not the owner: partition "...)
	}
	b = strconv.AppendInt(b, int64(e.Partition), 10)
	switch {
	case e.Owner == "":
		b = append(b, ", owner unknown"...)
	case e.Releasing:
		b = append(b, ", next owner "...)
	default:
		b = append(b, ", owner "...)
	}
	if e.Owner != "" {
		b = strconv.AppendQuote(b, e.Owner)
		if e.Addr != "" {
			b = append(b, " at "...)
			b = append(b, e.Addr...)
		}
		if e.Epoch != 0 {
			b = append(b, " epoch "...)
			b = strconv.AppendInt(b, e.Epoch, 10)
		}
	}
	if e.Acquiring {
		b = append(b, ", acquiring here"...)
	}
	return string(b)
}

// Is reports whether target is ErrNotOwner, ErrReleasing for an error
// raised during a handoff, ErrLost for one raised while the session is
// lost, or ErrNoOwner when the owner or its address is unknown.
func (e *WrongOwnerError) Is(target error) bool {
	switch target {
	case ErrNotOwner:
		return true
	case ErrReleasing:
		return e.Releasing
	case ErrLost:
		return e.SessionLost
	case ErrNoOwner:
		return e.Owner == "" || e.Addr == ""
	}
	return false
}

var (
	// ErrForeignFencer reports a Fencer whose floors live in etcd under
	// another fleet's fence prefix (an etcdfence.Store configured with
	// another Cluster or Prefix than the node's): its floors would fence
	// another fleet's owners, or theirs this fleet's. Join (through
	// Config.Validate) refuses it; the error also wraps ErrInvalidConfig.
	ErrForeignFencer = errors.New("ownership: fencer belongs to another fleet")

	// ErrUnavailable reports that etcd did not answer before the context of
	// Join (or of router.NewClient) ended. The error also wraps the
	// context's error and names the last cause seen (connection refused, no
	// answer, ...).
	ErrUnavailable = errors.New("ownership: etcd unavailable")

	// ErrWeightUnsupported reports a node configured with a capacity
	// weight other than 1 (Config.Weight) for a fleet whose ring algorithm
	// is ring.AlgorithmBounded, which counts partitions only and would
	// ignore the weight. Join refuses such a node before it registers; the
	// message says how to get a weighted fleet.
	ErrWeightUnsupported = errors.New("ownership: capacity weight unsupported by the fleet's ring algorithm")

	// ErrMetrics reports that a Node's metrics could not be registered with
	// Config.Metrics (a prometheus.AlreadyRegisteredError, wrapped, if a
	// node with the same ID registered there already).
	ErrMetrics = errors.New("ownership: register metrics")
)

// RewindError reports that etcd's revisions went backwards under a
// partition this node claimed: a store's floor for the partition is above
// the claim's epoch and above etcd's revision when the node checked. The
// node keeps the claim and admits no work for the partition, and advances
// its fencers again with backoff: it serves once etcd's revisions pass the
// floor (a restore with etcdutl's --bump-revision does that at once).
// errors.Is(err, ErrRewound) and errors.Is(err, fence.ErrStale) hold.
type RewindError struct {
	// Partition is the partition claimed.
	Partition int `json:"partition"`
	// Scope is the fenced scope ("p/<partition>").
	Scope string `json:"scope"`
	// Epoch is the claim's epoch: the revision etcd issued it at.
	Epoch int64 `json:"epoch"`
	// Floor is the highest epoch the store had admitted for Scope.
	Floor int64 `json:"floor"`
	// Revision is etcd's revision as the node read it after the refusal.
	Revision int64 `json:"revision"`

	stale error // the fencer's refusal
}

// Error implements error.
func (e *RewindError) Error() string {
	return fmt.Sprintf("ownership: etcd revisions went backwards (restored from a snapshot?): partition %d: "+
		"a store's floor %d for scope %q is above the epoch %d etcd just issued and above its revision %d",
		e.Partition, e.Floor, e.Scope, e.Epoch, e.Revision)
}

// Unwrap returns ErrRewound and the fencer's refusal (a
// *fence.StaleError), if known.
func (e *RewindError) Unwrap() []error {
	if e.stale == nil {
		return []error{ErrRewound}
	}
	return []error{ErrRewound, e.stale}
}
