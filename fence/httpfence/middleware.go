package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tenure-go/tenure/fence"
)

// Admitter admits a token or refuses it: nil, a *fence.StaleError (errors.Is
// fence.ErrStale), an error wrapping fence.ErrInvalidToken, or any other
// failure. etcdfence.Store and sqlfence.Fencer are Admitters; wrap a
// *fence.Gate with Gate.
type Admitter interface {
	Admit(ctx context.Context, t fence.Token) error
}

// AdmitFunc adapts a function to Admitter.
type AdmitFunc func(ctx context.Context, t fence.Token) error

// Admit calls f.
func (f AdmitFunc) Admit(ctx context.Context, t fence.Token) error { return f(ctx, t) }

// Gate returns the Admitter that admits tokens at g.
func Gate(g *fence.Gate) Admitter {
	return AdmitFunc(func(_ context.Context, t fence.Token) error { return g.Advance(t) })
}

// ErrorBody is the JSON body of the Middleware's refusals.
type ErrorBody struct {
	// Error says what went wrong.
	Error string `json:"error"`
	// Scope, Presented and Current describe a stale token (409): its scope,
	// its epoch and the newest epoch admitted for the scope (0 if unknown).
	Scope     string `json:"scope,omitempty"`
	Presented int64  `json:"presented,omitempty"`
	Current   int64  `json:"current,omitempty"`
}

// Handler admits the token of each request before passing it on. It is
// safe for concurrent use if its Admitter and Next are.
type Handler struct {
	// Admitter decides on each token. It must not be nil.
	Admitter Admitter
	// Next serves admitted requests, whose context carries the token.
	Next http.Handler
	// Optional lets requests without the header through, unfenced: their
	// context carries no token. By default they get 428.
	Optional bool
}

// Middleware returns the Handler that admits each request's token with a
// before calling next.
func Middleware(a Admitter, next http.Handler) *Handler {
	return &Handler{Admitter: a, Next: next}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, present, err := FromHeader(r.Header)
	switch {
	case err != nil:
		WriteError(w, err)
		return
	case !present && h.Optional:
		h.Next.ServeHTTP(w, r)
		return
	case !present:
		WriteError(w, fmt.Errorf("%w: the %s header is required", fence.ErrNoToken, Header))
		return
	}
	if h.Admitter == nil {
		refuse(w, http.StatusServiceUnavailable, ReasonFailed, ErrorBody{Error: "httpfence: no admitter configured"})
		return
	}
	if err := h.Admitter.Admit(r.Context(), tok); err != nil {
		if !WriteError(w, err) {
			refuse(w, http.StatusServiceUnavailable, ReasonFailed, ErrorBody{Error: "httpfence: the fence could not admit the token: " + err.Error()})
		}
		return
	}
	h.Next.ServeHTTP(w, r.WithContext(fence.NewContext(r.Context(), tok)))
}

// WriteError answers a request with the refusal the Middleware would give
// for err, if err is a fencing error: 409 for a stale token
// (errors.As *fence.StaleError), 400 for an invalid one
// (fence.ErrInvalidToken), 428 for a missing one (fence.ErrNoToken). It
// reports whether it answered; for any other error it writes nothing and
// returns false. Handlers use it for the refusals of their own fenced
// writes.
func WriteError(w http.ResponseWriter, err error) bool {
	var se *fence.StaleError
	switch {
	case errors.As(err, &se):
		refuse(w, http.StatusConflict, ReasonStale, ErrorBody{Error: se.Error(), Scope: se.Scope, Presented: se.Presented, Current: se.Current})
	case errors.Is(err, fence.ErrInvalidToken):
		refuse(w, http.StatusBadRequest, ReasonMalformed, ErrorBody{Error: err.Error()})
	case errors.Is(err, fence.ErrNoToken):
		refuse(w, http.StatusPreconditionRequired, ReasonMissing, ErrorBody{Error: err.Error()})
	default:
		return false
	}
	return true
}

func refuse(w http.ResponseWriter, code int, reason string, body ErrorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(ErrorHeader, reason)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// maxErrorBody bounds how much of a refusal ResponseError reads.
const maxErrorBody = 64 << 10

// ResponseError returns the error of a response refused by a Middleware,
// or nil if the Middleware did not refuse it (the ErrorHeader is absent):
// a *fence.StaleError for 409, an error wrapping fence.ErrMalformedToken
// for a malformed token, fence.ErrNoToken for a missing one, and otherwise
// an error describing the failure. It reads (but does not close) the body
// of a refused response.
func ResponseError(resp *http.Response) error {
	reason := resp.Header.Get(ErrorHeader)
	if reason == "" {
		return nil
	}
	var body ErrorBody
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		body.Error = fmt.Sprintf("unreadable refusal body: %v", err)
	}
	switch reason {
	case ReasonStale:
		if body.Scope == "" || body.Presented <= 0 {
			return fmt.Errorf("%w: %s (%d %s)", fence.ErrStale, body.Error, resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		return &fence.StaleError{Scope: body.Scope, Presented: body.Presented, Current: body.Current}
	case ReasonMalformed:
		return fmt.Errorf("%w: refused by the server: %s", fence.ErrMalformedToken, body.Error)
	case ReasonMissing:
		return fmt.Errorf("%w: refused by the server: %s", fence.ErrNoToken, body.Error)
	}
	return fmt.Errorf("httpfence: %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), body.Error)
}
