package httpfence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/refusal"
)

// RefusalHeader is set on every refusal written by WriteRefusal (and so
// by a Handler and router.WriteError); its value is the refusal's
// RefusalKind. A response without it is the application's own answer,
// whatever its status.
const RefusalHeader = "Tenure-Refusal"

// RefusalKind says why a request was refused. It is a short lower-case word,
// the value of the RefusalHeader and of the body's "kind".
//
// Every kind is declared once, in tenure's refusal table
// (internal/refusal/table.go), with its status, its gRPC form, whether it
// is retryable and the hint it carries; Refusal.Status and
// Refusal.Retryable read it, and so do package router and grpcroute. The
// constants below are the kinds of this version.
type RefusalKind string

// The kinds of refusal, with the status WriteRefusal answers them with.
const (
	// RefusalStale (409 Conflict): the request's token is older than the
	// floor of its scope: the tenure that sent or served it has ended.
	// Scope, Presented and Current describe the token.
	RefusalStale = RefusalKind(refusal.Stale)
	// RefusalNotOwner (421 Misdirected Request): the answering node does
	// not own the request's partition. The Hint says where to send it.
	RefusalNotOwner = RefusalKind(refusal.NotOwner)
	// RefusalHandoff (503 Service Unavailable, Retry-After): the partition
	// is moving and its next owner does not serve it yet. The Hint names
	// it when known.
	RefusalHandoff = RefusalKind(refusal.Handoff)
	// RefusalSessionLost (503 Service Unavailable, Retry-After): the
	// answering node lost its session (or is closing) and serves nothing
	// until it rejoins; another node takes its partitions over.
	RefusalSessionLost = RefusalKind(refusal.SessionLost)
	// RefusalInvalidToken (400 Bad Request): the request's token header is
	// malformed, or the fence found the token invalid.
	RefusalInvalidToken = RefusalKind(refusal.InvalidToken)
	// RefusalUnverified (403 Forbidden): the request's token is well formed
	// but the Handler cannot show that the fleet issued it (no signature,
	// a bad one, an epoch no claim has): it was not admitted and raised no
	// floor. 403, not 401: the caller is not asked to authenticate (401
	// requires a WWW-Authenticate challenge); the token itself is refused,
	// and the same request would be refused again.
	RefusalUnverified = RefusalKind(refusal.Unverified)
	// RefusalNoToken (428 Precondition Required): the request carries no
	// token where one is required.
	RefusalNoToken = RefusalKind(refusal.NoToken)
	// RefusalUnavailable (503 Service Unavailable, Retry-After): the fence
	// could not decide (its store is unreachable, or the Handler is not
	// configured); the request was not served.
	RefusalUnavailable = RefusalKind(refusal.Unavailable)
)

// retryAfter is the Retry-After, in seconds, of the 503 refusals: about the
// time a handoff or a rejoin takes.
const retryAfter = "1"

// maxRefusalBody bounds how much of a refusal's body ReadRefusal reads.
const maxRefusalBody = 64 << 10

// Refusal is tenure's one answer to a request it does not serve: a stale
// token, a node that does not own the partition, a handoff in progress, a
// lost session, or a token that is invalid or missing. WriteRefusal writes
// it (status by Kind, the RefusalHeader, a JSON body of these fields) and
// ReadRefusal reads it back. httpfence knows tokens and their staleness;
// where the request goes next is the Hint's, which the router writes and
// reads (package router) and httpfence carries as it is.
//
// A *Refusal is an error: errors.As finds it, telling a refusal by tenure
// from a transport error or an application's answer, and
// errors.Is(err, fence.ErrStale) holds for RefusalStale (and errors.As finds a
// *fence.StaleError when Scope and Presented are set), fence.ErrInvalidToken
// for RefusalInvalidToken, fence.ErrNoToken for RefusalNoToken and
// fence.ErrUnverified for RefusalUnverified.
type Refusal struct {
	// Kind says why the request was refused.
	Kind RefusalKind `json:"kind"`
	// Message describes the refusal for people; Error returns it.
	Message string `json:"message,omitempty"`

	// Scope, Presented and Current describe a stale token: its scope, its
	// epoch and the newest epoch admitted for the scope (0 if unknown).
	Scope     string `json:"scope,omitempty"`
	Presented int64  `json:"presented,omitempty"`
	Current   int64  `json:"current,omitempty"`

	// Hint, if not empty, is one JSON object that says where the request
	// goes instead: the router's hint of the partition's owner (see
	// package router for its fields). httpfence does not interpret it;
	// WriteRefusal and ReadRefusal require it to be a JSON object.
	Hint json.RawMessage `json:"hint,omitempty"`
}

// Error implements error. It returns Message, or a description built from
// the other fields if Message is empty.
func (r *Refusal) Error() string {
	if r.Message != "" {
		return r.Message
	}
	if r.Kind == RefusalStale && r.Scope != "" {
		return r.staleError().Error()
	}
	return "httpfence: refused: " + string(r.Kind)
}

// Unwrap returns the fencing error the refusal stands for: a
// *fence.StaleError (or fence.ErrStale when the token is not described)
// for RefusalStale, fence.ErrInvalidToken, fence.ErrNoToken,
// fence.ErrUnverified, or nil.
func (r *Refusal) Unwrap() error {
	if r.Kind == RefusalStale && r.Scope != "" && r.Presented > 0 {
		return r.staleError()
	}
	return kindError(r.Kind)
}

func (r *Refusal) staleError() *fence.StaleError {
	return &fence.StaleError{Scope: r.Scope, Presented: r.Presented, Current: r.Current}
}

// kindError is the sentinel that every refusal of kind k matches (the
// table's Err), or nil.
func kindError(k RefusalKind) error {
	row, _ := refusal.Lookup(refusal.Kind(k))
	return row.Err
}

// Retryable reports whether the caller should send the request again, after
// a delay and to the partition's owner as it resolves it then, as the
// refusal table says of r's kind: true for a stale token (the tenure that
// served it ended; a router client resolves the new owner), not-owner,
// handoff, session-lost and unavailable; false for an invalid, missing or
// unverified token, which the same request would meet again, and for kinds
// this version does not know. A refusal says nothing of writes a handler
// made before it refused: make retries safe with an idempotency key.
func (r *Refusal) Retryable() bool {
	row, _ := refusal.Lookup(refusal.Kind(r.Kind))
	return row.Retryable
}

// status returns the HTTP status WriteRefusal answers r with, the refusal
// table's for r's kind: 500 for a kind this version does not know.
func (r *Refusal) status() int {
	if row, ok := refusal.Lookup(refusal.Kind(r.Kind)); ok {
		return row.Status
	}
	return http.StatusInternalServerError
}

// validate reports whether r can travel: a kind of 1 to 32 characters
// a-z, 0-9 and '-', no negative number, a valid scope if any, a hint that
// is empty or one JSON object.
func (r *Refusal) validate() error {
	k := r.Kind
	if len(k) == 0 || len(k) > 32 {
		return fmt.Errorf("%w: kind of %d bytes", ErrInvalidRefusal, len(k))
	}
	for _, c := range []byte(k) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("%w: kind %q", ErrInvalidRefusal, k)
		}
	}
	if r.Presented < 0 || r.Current < 0 {
		return fmt.Errorf("%w: negative number (presented %d, current %d)", ErrInvalidRefusal, r.Presented, r.Current)
	}
	if len(r.Hint) > 0 && (!json.Valid(r.Hint) || bytes.TrimLeft(r.Hint, " \t\r\n")[0] != '{') {
		return fmt.Errorf("%w: hint is not a JSON object", ErrInvalidRefusal)
	}
	if r.Scope != "" {
		if err := fence.ValidateScope(r.Scope); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRefusal, err)
		}
	}
	return nil
}

// WriteRefusal answers a request with r: the status of r.Kind (the
// refusal table's; 500 for a kind this version does not know),
// the RefusalHeader, Retry-After on a 503, and r as a JSON body. It returns
// ErrNilArgument, writing nothing, if w is nil. A nil or invalid r is
// answered as RefusalUnavailable, never as success, and the error wraps
// ErrInvalidRefusal.
func WriteRefusal(w http.ResponseWriter, r *Refusal) error {
	if nilness.Is(w) {
		return fmt.Errorf("%w: http.ResponseWriter %T", ErrNilArgument, w)
	}
	var invalid error
	if r == nil {
		invalid = fmt.Errorf("%w: nil", ErrInvalidRefusal)
	} else {
		invalid = r.validate()
	}
	if invalid != nil {
		r = &Refusal{Kind: RefusalUnavailable, Message: invalid.Error()}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(RefusalHeader, string(r.Kind))
	status := r.status()
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(r); err != nil && invalid == nil {
		return fmt.Errorf("httpfence: write refusal: %w", err)
	}
	return invalid
}

// ReadRefusal reads the refusal of resp. It returns (nil, nil) if resp is
// not a refusal (it has no RefusalHeader), leaving its body alone; the
// refusal and nil if it is one; and nil and an error wrapping
// ErrInvalidRefusal if the header names a refusal that cannot be read
// (several headers, a body that is not its JSON, a kind that differs from
// the header's, a negative number, an invalid scope, a hint that is not
// a JSON object). It reads at most
// 64 KiB of a refusal's body and does not close it. A kind this version
// does not know is returned as it is.
func ReadRefusal(resp *http.Response) (*Refusal, error) {
	if resp == nil {
		return nil, fmt.Errorf("%w: nil *http.Response", ErrNilArgument)
	}
	kinds := resp.Header.Values(RefusalHeader)
	switch len(kinds) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%w: %d %s headers", ErrInvalidRefusal, len(kinds), RefusalHeader)
	}
	var raw []byte
	if resp.Body != nil {
		var err error
		raw, err = io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody+1))
		if err != nil {
			return nil, fmt.Errorf("%w: read body: %w", ErrInvalidRefusal, err)
		}
	}
	if len(raw) > maxRefusalBody {
		return nil, fmt.Errorf("%w: body exceeds %d bytes", ErrInvalidRefusal, maxRefusalBody)
	}
	var r Refusal
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: %s %q: body: %w", ErrInvalidRefusal, RefusalHeader, kinds[0], err)
	}
	if string(r.Kind) != kinds[0] {
		return nil, fmt.Errorf("%w: body kind %q, %s %q", ErrInvalidRefusal, r.Kind, RefusalHeader, kinds[0])
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if len(r.Hint) > 0 {
		var hint bytes.Buffer
		_ = json.Compact(&hint, r.Hint) // valid: validate checked it
		r.Hint = hint.Bytes()
	}
	return &r, nil
}

// statusText names a status for messages, "409 Conflict".
func statusText(code int) string { return strconv.Itoa(code) + " " + http.StatusText(code) }
