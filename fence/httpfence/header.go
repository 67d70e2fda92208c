package httpfence

import (
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fence"
)

// Header is the name of the HTTP header that carries a token.
const Header = "Tenure-Fence-Token"

// SetHeader sets h's token header (Header) to t and its signature header
// (SignatureHeader) to sig, the fleet's signature of t; a zero sig removes
// the signature header. It returns an error wrapping
// fence.ErrInvalidToken, and leaves h alone, if t is invalid.
func SetHeader(h http.Header, t fence.Token, sig fence.Signature) error {
	if err := t.Validate(); err != nil {
		return err
	}
	h.Set(Header, t.String())
	if sig.IsZero() {
		h.Del(SignatureHeader)
	} else {
		h.Set(SignatureHeader, sig.String())
	}
	return nil
}

// fromHeader reads the token from h. It reports whether the header is
// present; a present header that does not hold exactly one valid token
// gives an error wrapping fence.ErrInvalidToken.
func fromHeader(h http.Header) (fence.Token, bool, error) {
	vs := h.Values(Header)
	switch len(vs) {
	case 0:
		return fence.Token{}, false, nil
	case 1:
	default:
		return fence.Token{}, true, fmt.Errorf("%w: %d %s headers", fence.ErrInvalidToken, len(vs), Header)
	}
	t, err := fence.ParseToken(vs[0])
	if err != nil {
		return fence.Token{}, true, err
	}
	return t, true, nil
}
