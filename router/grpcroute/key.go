package grpcroute

import (
	"context"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/metadata"
)

// The metadata a routed call carries. Clients in other languages set them
// by hand: MetadataKey names the call's key, MetadataIdempotencyKey a value
// that stays the same on every attempt of one call.
const (
	MetadataKey            = "tenure-key"
	MetadataIdempotencyKey = "tenure-idempotency-key"
)

// maxKeyLen is the length in bytes of the longest routing key a call may
// carry.
const maxKeyLen = 4096

// KeyFunc returns the routing key of a call to the full method name method
// (such as "/counter.v1.Counter/Add") whose request message is req. An
// error (wrap ErrNoKey or ErrInvalidKey) fails the call with
// codes.InvalidArgument.
type KeyFunc func(ctx context.Context, method string, req any) (string, error)

// keyCtx is the context key of the routing key WithKey sets.
type keyCtx struct{}

// WithKey returns a context whose calls through a Client's connection are
// routed by key. Streaming calls take their key from it (their request
// messages are sent after the call has been routed), or from MetadataKey
// in the outgoing metadata; unary calls too when the ClientConfig has no
// KeyFunc.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// servedKey is the context key of the key of the call a Server admitted.
type servedKey struct{}

// KeyFromContext returns the routing key of the call a Server admitted,
// from the context its handler runs under.
func KeyFromContext(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(servedKey{}).(string)
	return k, ok
}

// IdempotencyKey returns the idempotency key of the call a handler serves
// (MetadataIdempotencyKey of its incoming metadata): the same on every
// attempt a Client makes of one call, so that the handler can apply the
// call at most once. It returns "" when the call carries none.
func IdempotencyKey(ctx context.Context) string {
	vs := metadata.ValueFromIncomingContext(ctx, MetadataIdempotencyKey)
	if len(vs) != 1 {
		return ""
	}
	return vs[0]
}

// checkKey returns a *keyError if key cannot be routed.
func checkKey(key string) error {
	switch {
	case key == "":
		return &keyError{fmt.Errorf("%w: empty", ErrInvalidKey)}
	case len(key) > maxKeyLen:
		return &keyError{fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidKey, len(key), maxKeyLen)}
	case !utf8.ValidString(key):
		return &keyError{fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)}
	}
	return nil
}

// keyOfMetadata returns the one routing key in vs, the values of
// MetadataKey.
func keyOfMetadata(vs []string) (string, error) {
	switch len(vs) {
	case 0:
		return "", &keyError{fmt.Errorf("%w: no %q metadata", ErrNoKey, MetadataKey)}
	case 1:
		return vs[0], checkKey(vs[0])
	}
	return "", &keyError{fmt.Errorf("%w: %d values of %q metadata, want one", ErrInvalidKey, len(vs), MetadataKey)}
}

// userKeyError returns the error of a KeyFunc as a *keyError.
func userKeyError(err error) error {
	if _, ok := err.(*keyError); ok {
		return err
	}
	return &keyError{fmt.Errorf("grpcroute: key: %w", err)}
}
