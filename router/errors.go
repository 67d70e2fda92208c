package router

import (
	"errors"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/internal/follow"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ring"
)

var (
	// ErrNotOwner reports that this node does not serve the key's partition.
	// The error is an *ownership.WrongOwnerError that names the owner when
	// it is known. It is ownership.ErrNotOwner: one idea, one sentinel.
	ErrNotOwner = ownership.ErrNotOwner

	// ErrNoOwner reports that no owner with an address is known for the
	// key's partition, typically in the middle of a handoff or while the
	// fleet is empty. It is an *ownership.WrongOwnerError whose Owner or Addr
	// is empty, so errors.Is(err, ErrNotOwner) holds as well. It is
	// ownership.ErrNoOwner.
	ErrNoOwner = ownership.ErrNoOwner

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
	// Backoff allows without a definite answer, or that every attempt of
	// Router.Do reported the end of its tenure. The last attempt's error is
	// wrapped as well, so errors.Is and errors.As see it.
	ErrRetriesExhausted = errors.New("router: retries exhausted")

	// ErrAttemptTimeout reports an attempt of Client.Do that had no answer
	// within ClientConfig.AttemptTimeout and was cut off; the call sends
	// it again, and wraps it as its last attempt's error if it fails.
	// errors.Is(err, context.DeadlineExceeded) holds for it too. It is
	// grpcroute.ErrAttemptTimeout as well: one bound, one sentinel.
	ErrAttemptTimeout = follow.ErrAttemptTimeout

	// ErrNotReplayable reports that Client.Do could not retry a request
	// because its body cannot be read a second time (the request has a Body
	// but no GetBody). The error of the failed attempt is wrapped as well.
	ErrNotReplayable = errors.New("router: request body cannot be replayed")

	// ErrNoKey reports a request that carries no routing key where the
	// KeyFunc looked for one.
	ErrNoKey = errors.New("router: request has no key")

	// ErrUnavailable reports that etcd did not answer NewClient before its
	// context ended. The error also wraps the context's error and names the
	// last cause seen (connection refused, no answer, ...). It is
	// ownership.ErrUnavailable, which Join reports alike.
	ErrUnavailable = ownership.ErrUnavailable

	// ErrClientClosed reports that NewClient was given an etcd client that
	// is closed, or that was closed before NewClient had read the fleet: no
	// call through it can reach etcd. It is ownership.ErrClientClosed.
	ErrClientClosed = ownership.ErrClientClosed

	// ErrSpecMismatch reports a ClientConfig that asserts a partition count
	// or load factor other than the fleet's spec. The error is an
	// *ring.SpecMismatchError naming both values. It is
	// ring.ErrSpecMismatch.
	ErrSpecMismatch = ring.ErrSpecMismatch

	// ErrPartitionMismatch reports that the Client saw a claim for a
	// partition outside [0, P) of the fleet's spec: the fleet's keys in etcd
	// contradict its spec, and routing would be wrong. It is
	// fleet.ErrPartitionMismatch, which the fleet's reader reports.
	ErrPartitionMismatch = fleet.ErrPartitionMismatch

	// ErrMetrics reports that a Router's or Client's metrics could not be
	// registered with Config.Metrics or ClientConfig.Metrics (a
	// prometheus.AlreadyRegisteredError, wrapped, if the same metrics are
	// registered there already).
	ErrMetrics = errors.New("router: register metrics")
)
