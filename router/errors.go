package router

import (
	"errors"
	"strconv"

	"github.com/tenure-go/tenure/internal/retry"
)

var (
	// ErrNotOwner reports that this node does not serve the key's partition.
	// The error is a *WrongOwnerError that names the owner when it is known.
	ErrNotOwner = errors.New("router: not the owner")

	// ErrNoOwner reports that no owner with an address is known for the
	// key's partition, typically in the middle of a handoff or while the
	// fleet is empty. It is a *WrongOwnerError whose Owner or Addr is empty,
	// so errors.Is(err, ErrNotOwner) holds as well.
	ErrNoOwner = errors.New("router: no owner known")

	// ErrClosed reports an operation on a closed Router or Client, or on a
	// Router whose node has been closed.
	ErrClosed = errors.New("router: closed")

	// ErrInvalidConfig reports a Config or ClientConfig that cannot be used.
	// The message names the field and its value.
	ErrInvalidConfig = errors.New("router: invalid config")

	// ErrInvalidBackoff reports a Backoff that Backoff.Validate refuses;
	// ClientConfig.Validate wraps it together with ErrInvalidConfig.
	ErrInvalidBackoff = retry.ErrInvalid

	// ErrNilArgument reports a required argument that is nil: a node, an etcd
	// client, a function, a handler or a request.
	ErrNilArgument = errors.New("router: nil argument")

	// ErrRetriesExhausted reports that Client.Do made every attempt its
	// Backoff allows without a definite answer. The last attempt's error is
	// wrapped as well, so errors.Is and errors.As see it.
	ErrRetriesExhausted = errors.New("router: retries exhausted")

	// ErrNotReplayable reports that Client.Do could not retry a request
	// because its body cannot be read a second time (the request has a Body
	// but no GetBody). The error of the failed attempt is wrapped as well.
	ErrNotReplayable = errors.New("router: request body cannot be replayed")

	// ErrNoKey reports a request that carries no routing key where the
	// KeyFunc looked for one.
	ErrNoKey = errors.New("router: request has no key")

	// ErrPartitionMismatch reports that the Client saw a claim for a
	// partition outside [0, Partitions): ClientConfig.Partitions differs from
	// the fleet's partition count, and routing would be wrong.
	ErrPartitionMismatch = errors.New("router: partition count does not match the fleet")
)

// WrongOwnerError reports that the key's partition is served elsewhere, with
// what a caller needs to send the work to its owner. errors.Is(err,
// ErrNotOwner) always holds; errors.Is(err, ErrNoOwner) holds when Owner or
// Addr is empty. The error that caused it (for Router.Do, the ownership
// package's *WrongOwnerError) is available through errors.Unwrap.
type WrongOwnerError struct {
	// Partition is the key's partition.
	Partition int
	// Owner is the ID of the node that owns the partition or is about to,
	// empty if unknown.
	Owner string
	// Addr is Owner's advertised address (host:port), empty if unknown.
	Addr string
	// Epoch is the epoch of Owner's claim on the partition, 0 if Owner holds
	// no claim yet.
	Epoch int64
	// RingVersion is the version of the ring the answering node routed with,
	// 0 if unknown.
	RingVersion uint64
	// Err is the underlying error, nil if none.
	Err error
}

// Error implements error.
func (e *WrongOwnerError) Error() string {
	b := append([]byte(nil), "router: not the owner of partition "...)
	b = strconv.AppendInt(b, int64(e.Partition), 10)
	if e.Owner == "" {
		b = append(b, ": owner unknown"...)
	} else {
		b = append(b, ": owner "...)
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
	if e.Err != nil {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

// Is reports whether target is ErrNotOwner, or ErrNoOwner when the owner or
// its address is unknown.
func (e *WrongOwnerError) Is(target error) bool {
	return target == ErrNotOwner || (target == ErrNoOwner && (e.Owner == "" || e.Addr == ""))
}

// Unwrap returns the underlying error.
func (e *WrongOwnerError) Unwrap() error { return e.Err }
