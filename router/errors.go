package router

import "errors"

// The router's own errors. What the router passes on from the packages it
// builds on keeps its one name there: a node that does not serve a key
// answers ownership.ErrNotOwner (ownership.ErrNoOwner when no owner is
// known), and NewClient reports ownership.ErrUnavailable,
// ownership.ErrClientClosed, fleet.ErrNoSpec, ring.ErrSpecMismatch and
// ring.ErrSpecMismatch.
var (
	// ErrClosed reports an operation on a closed Router or Client, or on a
	// Router whose node has been closed.
	ErrClosed = errors.New("router: closed")

	// ErrInvalidConfig reports a Config or ClientConfig that cannot be used.
	// The message names the field and its value.
	ErrInvalidConfig = errors.New("router: invalid config")

	// ErrInvalidBackoff reports a Backoff that Backoff.Validate refuses;
	// Config.Validate and ClientConfig.Validate wrap it together with
	// ErrInvalidConfig, and grpcroute.ClientConfig.Validate together with
	// grpcroute.ErrInvalidConfig.
	ErrInvalidBackoff = errors.New("router: invalid backoff")

	// ErrNilArgument reports a required argument that is nil: a node, an etcd
	// client, a function, a handler or a request.
	ErrNilArgument = errors.New("router: nil argument")

	// ErrRetriesExhausted reports that Client.Do made every attempt its
	// Backoff allows without a definite answer, or that every attempt of
	// Router.Do reported the end of its tenure. The last attempt's error is
	// wrapped as well, so errors.Is and errors.As see it.
	ErrRetriesExhausted = errors.New("router: retries exhausted")

	// ErrAttemptTimeout reports an attempt of Client.Do, or of a call of a
	// grpcroute.Client, that had no answer within its ClientConfig's
	// AttemptTimeout and was cut off; the call sends it again, and wraps
	// it as its last attempt's error if it fails. errors.Is(err,
	// context.DeadlineExceeded) holds for it too. One bound, one
	// sentinel: grpcroute's calls report it as well.
	ErrAttemptTimeout = errors.New("router: attempt had no answer within its AttemptTimeout")

	// ErrNotReplayable reports that Client.Do could not retry a request
	// because its body cannot be read a second time (the request has a Body
	// but no GetBody). The error of the failed attempt is wrapped as well.
	ErrNotReplayable = errors.New("router: request body cannot be replayed")

	// ErrNoKey reports a request that carries no routing key where the
	// KeyFunc looked for one.
	ErrNoKey = errors.New("router: request has no key")

	// ErrMetrics reports that a Router's or Client's metrics could not be
	// registered with Config.Metrics or ClientConfig.Metrics (a
	// prometheus.AlreadyRegisteredError, wrapped, if the same metrics are
	// registered there already).
	ErrMetrics = errors.New("router: register metrics")
)
