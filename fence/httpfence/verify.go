package httpfence

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fence"
)

// SignatureHeader is the name of the HTTP header that carries the fleet's
// signature of the request's token (fence.Signature.String), next to
// Header.
const SignatureHeader = "Tenure-Fence-Signature"

// Verifier tells whether the fleet issued a token, before a Handler lets
// the token reach its Fencer. Verify returns nil if it can show that the
// fleet issued t; an error wrapping fence.ErrStale if t is a real token of
// a tenure that has ended (it is refused as stale, and the floor is left
// alone); an error wrapping fence.ErrUnverified if it cannot show that the
// fleet issued t (refused with RefusalUnverified); any other error if it
// could not decide (refused with RefusalUnavailable). sig is the signature
// that came with the token, the zero fence.Signature if none did; a
// verifier that does not check signatures ignores it. Verify must be safe
// for concurrent use and return promptly when ctx ends.
//
// Two verifiers come with tenure: *fence.SignatureVerifier checks the
// fleet's Ed25519 signatures with public keys alone, and
// *fleet.Observer checks the token's epoch against its watched view of
// the fleet's claims. InsecureNoVerify verifies nothing.
type Verifier interface {
	Verify(ctx context.Context, t fence.Token, sig fence.Signature) error
}

// InsecureNoVerify is the Verifier that admits every valid token without
// checking that the fleet issued it: anyone who can reach the Handler can
// then raise its Fencer's floors with a made-up token and shut the real
// holder out. Use it only on a network where every caller is trusted to
// present only tokens the fleet gave it.
type InsecureNoVerify struct{}

// Verify returns nil.
func (InsecureNoVerify) Verify(context.Context, fence.Token, fence.Signature) error { return nil }

// signatureFromHeader reads the signature from h: the zero fence.Signature
// if the header is absent, and an error wrapping fence.ErrBadSignature (and
// so fence.ErrUnverified) if it is present but does not hold exactly one
// well-formed signature.
func signatureFromHeader(h http.Header) (fence.Signature, error) {
	vs := h.Values(SignatureHeader)
	switch len(vs) {
	case 0:
		return fence.Signature{}, nil
	case 1:
	default:
		return fence.Signature{}, fmt.Errorf("%w: %d %s headers", fence.ErrBadSignature, len(vs), SignatureHeader)
	}
	return fence.ParseSignature(vs[0])
}

// The values of the reason label of tenure_fence_verify_refusals_total.
const (
	reasonStale        = "stale"
	reasonUnsigned     = "unsigned"
	reasonBadSignature = "bad-signature"
	reasonUnknownKey   = "unknown-key"
	reasonUnknownEpoch = "unknown-epoch"
	reasonUnknownScope = "unknown-scope"
	reasonUnverified   = "unverified"
	reasonUnavailable  = "unavailable"
)

// reasons lists every value of the reason label.
var reasons = []string{reasonStale, reasonUnsigned, reasonBadSignature, reasonUnknownKey,
	reasonUnknownEpoch, reasonUnknownScope, reasonUnverified, reasonUnavailable}

// reasonOf is the reason label of a verification error.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, fence.ErrStale):
		return reasonStale
	case errors.Is(err, fence.ErrUnsigned):
		return reasonUnsigned
	case errors.Is(err, fence.ErrBadSignature):
		return reasonBadSignature
	case errors.Is(err, fence.ErrUnknownKey):
		return reasonUnknownKey
	case errors.Is(err, fence.ErrUnknownEpoch):
		return reasonUnknownEpoch
	case errors.Is(err, fence.ErrUnknownScope):
		return reasonUnknownScope
	case errors.Is(err, fence.ErrUnverified):
		return reasonUnverified
	}
	return reasonUnavailable
}
