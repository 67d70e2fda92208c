package grpcroute

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrNoKey reports a call that carries no routing key: the KeyFunc
	// found none, and neither WithKey nor the MetadataKey metadata gave
	// one. The call fails with codes.InvalidArgument.
	ErrNoKey = errors.New("grpcroute: call has no key")

	// ErrInvalidKey reports a routing key that cannot be used: empty, not
	// valid UTF-8, longer than 4096 bytes, given more than once in the
	// metadata, or, at a Server with a ServerConfig.Key, given in the
	// metadata other than the request's. The call fails with
	// codes.InvalidArgument.
	ErrInvalidKey = errors.New("grpcroute: invalid key")

	// ErrInvalidConfig reports a ServerConfig, ClientConfig or target that
	// cannot be used. The message names the field and its value.
	ErrInvalidConfig = errors.New("grpcroute: invalid config")

	// ErrNilArgument reports a required argument that is nil.
	ErrNilArgument = errors.New("grpcroute: nil argument")

	// ErrRetriesExhausted reports that a call made every attempt the
	// ClientConfig's Backoff allows and each was refused with a retryable
	// answer. The last attempt's status error is wrapped as well, so that
	// status.Code and RefusalOf read it.
	ErrRetriesExhausted = errors.New("grpcroute: retries exhausted")

	// ErrMetrics reports that the metrics of a Server or Client could not be
	// registered (a prometheus.AlreadyRegisteredError, wrapped, if the same
	// metrics are registered there already).
	ErrMetrics = errors.New("grpcroute: register metrics")
)

// keyError is the error of a call without a usable key: errors.Is it
// ErrNoKey or ErrInvalidKey, and its gRPC status is InvalidArgument.
type keyError struct{ err error }

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// GRPCStatus makes the error travel as codes.InvalidArgument.
func (e *keyError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.err.Error())
}
