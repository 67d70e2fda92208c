package httpfence

import (
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Transport is an http.RoundTripper that attaches the token carried by each
// request's context (see fence.NewContext) as the Tenure-Fence-Token
// header, and its signature, if the context carries one
// (fence.NewSignedContext), as the Tenure-Fence-Signature header,
// replacing any such headers already set (a signature header is removed
// when the context's token has no signature). It never modifies the
// caller's request. A Transport is safe for concurrent use if Base is.
type Transport struct {
	// Base performs the requests. Nil means http.DefaultTransport; a typed
	// nil (such as a nil *http.Transport) fails every request with
	// ErrNilArgument.
	Base http.RoundTripper
	// Required makes a request whose context carries no token fail with
	// fence.ErrNoToken instead of going out unfenced.
	Required bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t == nil || (t.Base != nil && nilness.Is(t.Base)) {
		closeBody(req)
		return nil, fmt.Errorf("%w: nil *Transport or typed-nil Base", ErrNilArgument)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	tok, ok := fence.FromContext(req.Context())
	if !ok {
		if t.Required {
			closeBody(req)
			return nil, fmt.Errorf("httpfence: %s %s: %w", req.Method, req.URL, fence.ErrNoToken)
		}
		return base.RoundTrip(req)
	}
	if err := tok.Validate(); err != nil {
		closeBody(req)
		return nil, fmt.Errorf("httpfence: %s %s: %w", req.Method, req.URL, err)
	}
	r := req.Clone(req.Context())
	sig, _ := fence.SignatureFromContext(req.Context())
	_ = SetHeader(r.Header, tok, sig) // tok is valid
	return base.RoundTrip(r)
}

// closeBody closes a request body, as a RoundTripper must even on error.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
