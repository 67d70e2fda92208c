package fence

import (
	"errors"
	"fmt"
)

var (
	// ErrStale reports that a token's epoch is older than the newest epoch the
	// store has admitted for the token's scope: the token's holder has been
	// superseded and its write was rejected.
	ErrStale = errors.New("fence: stale token")

	// ErrInvalidToken reports a token that can never be admitted: an empty or
	// malformed scope, or an epoch that is not positive; and a string that
	// ParseToken cannot read.
	ErrInvalidToken = errors.New("fence: invalid token")

	// ErrNoToken reports that a context carries no token where one is needed.
	ErrNoToken = errors.New("fence: no token")

	// ErrNilArgument reports a nil where a value is required, such as a nil
	// FencerFunc.
	ErrNilArgument = errors.New("fence: nil argument")
)

// StaleError is the error returned when a store rejects a token. It carries
// the scope, the epoch that was presented and the newest epoch the store had
// admitted for the scope. errors.Is(err, ErrStale) holds for every
// *StaleError.
type StaleError struct {
	// Scope is the scope the token fences.
	Scope string
	// Presented is the epoch of the rejected token.
	Presented int64
	// Current is the highest epoch admitted for Scope when the token was
	// rejected. Zero means the store could not say (for example a
	// compare-and-swap that failed without reporting the current value).
	Current int64
}

// Error implements error.
func (e *StaleError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("fence: stale token for scope %q: epoch %d has been superseded", e.Scope, e.Presented)
	}
	return fmt.Sprintf("fence: stale token for scope %q: epoch %d < current epoch %d", e.Scope, e.Presented, e.Current)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// staleError returns the *StaleError of token t refused because its
// scope's floor is current.
func staleError(t Token, current int64) *StaleError {
	return &StaleError{Scope: t.Scope, Presented: t.Epoch, Current: current}
}

// The errors of token verification. Every one wraps ErrUnverified, so that
// errors.Is(err, ErrUnverified) tells a token nobody can show the fleet
// issued from a stale one (ErrStale) or a verifier that could not decide
// (any other error).
var (
	// ErrUnverified reports a token whose issue by the fleet cannot be
	// shown: it is refused and never raises a floor.
	ErrUnverified = errors.New("fence: unverified token")

	// ErrUnsigned reports a token presented without a signature where one
	// is required. It wraps ErrUnverified.
	ErrUnsigned = fmt.Errorf("%w: unsigned", ErrUnverified)

	// ErrBadSignature reports a signature that is malformed or does not
	// match the token and key it names (another key's, another token's,
	// a tampered scope or epoch). It wraps ErrUnverified.
	ErrBadSignature = fmt.Errorf("%w: bad signature", ErrUnverified)

	// ErrUnknownKey reports a signature made with a key ID the verifier
	// holds no public key for. It wraps ErrUnverified.
	ErrUnknownKey = fmt.Errorf("%w: unknown signing key", ErrUnverified)

	// ErrUnknownEpoch reports an epoch above every claim the verifier
	// knows of for the token's scope: no holder of the scope was issued
	// it. It wraps ErrUnverified.
	ErrUnknownEpoch = fmt.Errorf("%w: epoch not issued", ErrUnverified)

	// ErrUnknownScope reports a scope the verifier cannot check (such as a
	// leader scope for a verifier of partition claims, or a partition
	// outside the fleet's). It wraps ErrUnverified.
	ErrUnknownScope = fmt.Errorf("%w: scope cannot be verified", ErrUnverified)

	// ErrInvalidKey reports a signing or verifying key that cannot be used:
	// a key of the wrong size, or an invalid key ID.
	ErrInvalidKey = errors.New("fence: invalid key")
)
