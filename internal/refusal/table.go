// Package refusal is tenure's one table of refusals: every kind of answer
// a node or a fenced service gives a request it does not serve, with what
// each wire says of it. The HTTP wire (fence/httpfence's Refusal, which
// httpfence's Handler and the router write, and router.Client reads) and
// the gRPC wire (a grpcroute status whose detail is a tenurepb.Refusal,
// which grpcroute's Server writes and its Client reads) both take their
// statuses, codes, retryability and hints from the table, so that a new
// kind is one row of it (and a scenario of TestEveryKindOnBothWires, which
// walks every row over both wires against real servers).
//
// This package also holds the rules every refusal follows whichever wire
// carries it (hint.go): what its hint may say, how its message is worded,
// and what a client takes from a hint it is told. Which kind a node's
// situation gets is decided by router/internal/admit's Decide, next to the
// admission it refuses: it reads the node's errors (package ownership),
// which this package does not import, so that fence/httpfence, imported
// by services that never talk to etcd, stays light.
package refusal

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

// Kind names a kind of refusal. Its value is the word the HTTP wire
// carries, in the Tenure-Refusal header and the JSON body's "kind"
// (httpfence.RefusalKind is the same word).
type Kind string

// The kinds of refusal. Their rows in the table say what each means on
// the wire.
const (
	Stale        Kind = "stale"
	NotOwner     Kind = "not-owner"
	Handoff      Kind = "handoff"
	SessionLost  Kind = "session-lost"
	Unavailable  Kind = "unavailable"
	InvalidToken Kind = "invalid-token"
	NoToken      Kind = "no-token"
	Unverified   Kind = "unverified"
)

// Route says whether a refusal carries the route of the request's
// partition (its Hint: HTTP's JSON "hint" object, the tenurepb.Refusal
// fields of the same names), and what a client makes of it.
type Route uint8

const (
	// NoRoute: the refusal is about the request's token, not about where
	// it goes; it carries no route.
	NoRoute Route = iota
	// Answer: the refusal is the answer "not here": it carries the route
	// the refusing node sees (possibly only the partition), and a client
	// takes it as a wrong-owner answer (router: *ownership.WrongOwnerError)
	// whatever it names.
	Answer
	// Advice: the refusal carries the route the refusing node sees when it
	// knows the partition; a client follows it only when it names an
	// owner.
	Advice
)

// Row is one kind of refusal and what each wire says of it.
type Row struct {
	// Kind is the kind's word.
	Kind Kind
	// Status is the HTTP status of the refusal; a 503 also carries
	// Retry-After.
	Status int
	// Code is the gRPC status code and Proto the kind of its
	// tenurepb.Refusal detail (proto enum tenure.v1.Refusal.Kind, whose
	// numbers never change). A kind without a gRPC form has codes.OK and
	// KIND_UNSPECIFIED: a gRPC handler's error of that kind is returned to
	// the caller as it is.
	Code  codes.Code
	Proto tenurepb.Refusal_Kind
	// Retryable says whether a client sends the request again, after a
	// delay and to the owner as it resolves it then, with the same
	// idempotency key. A refusal says nothing of writes a handler made
	// before it refused: retries are safe where servers dedupe on the key.
	Retryable bool
	// Route says whether the refusal carries the route of the partition
	// and what a client takes from it.
	Route Route
	// Token says whether the refusal describes the stale token: its
	// scope, the epoch it presented and the store's floor (HTTP: "scope",
	// "presented", "current"; gRPC: the fields of the same names).
	Token bool
	// Err is the fencing error the kind stands for, nil if none: a
	// refusal of the kind matches it (errors.Is), and an error that
	// matches it is refused with the kind (KindOf).
	Err error
}

// table is the one table of refusal kinds. Its order is KindOf's: the
// first row whose Err an error matches names its kind.
var table = [...]Row{
	// A write, or a token, older than the floor of its scope: the tenure
	// that sent or served it has ended; the write did not happen.
	{Kind: Stale, Status: http.StatusConflict, Code: codes.Aborted, Proto: tenurepb.Refusal_STALE,
		Retryable: true, Route: Advice, Token: true, Err: fence.ErrStale},
	// A forwarded request, or a gRPC call, on a node that does not own
	// the partition: the hint names the owner.
	{Kind: NotOwner, Status: http.StatusMisdirectedRequest, Code: codes.Unavailable, Proto: tenurepb.Refusal_NOT_OWNER,
		Retryable: true, Route: Answer},
	// The partition is moving, no owner with an address is known, or the
	// owner could not be reached: the hint names the next owner when
	// known (the refusing node itself while it finishes acquiring).
	{Kind: Handoff, Status: http.StatusServiceUnavailable, Code: codes.Unavailable, Proto: tenurepb.Refusal_HANDOFF,
		Retryable: true, Route: Answer},
	// The refusing node lost its session or is closing; another node
	// takes its partitions over.
	{Kind: SessionLost, Status: http.StatusServiceUnavailable, Code: codes.Unavailable, Proto: tenurepb.Refusal_SESSION_LOST,
		Retryable: true, Route: Answer},
	// etcd or a fence's store could not decide for now, or the server is
	// not configured: whether a write was applied is unknown.
	{Kind: Unavailable, Status: http.StatusServiceUnavailable, Code: codes.Unavailable, Proto: tenurepb.Refusal_UNAVAILABLE,
		Retryable: true, Route: Advice},
	// The token header is malformed, or the fence found the token
	// invalid: the same request would be refused again.
	{Kind: InvalidToken, Status: http.StatusBadRequest, Err: fence.ErrInvalidToken},
	// No token where one is required.
	{Kind: NoToken, Status: http.StatusPreconditionRequired, Err: fence.ErrNoToken},
	// A well-formed token that the fleet cannot be shown to have issued:
	// it was not admitted and raised no floor. 403, not 401: the caller
	// is not asked to authenticate; the token itself is refused.
	{Kind: Unverified, Status: http.StatusForbidden, Err: fence.ErrUnverified},
}

// Rows returns a copy of the table, in its order.
func Rows() []Row { return append([]Row(nil), table[:]...) }

// Lookup returns the row of kind k, and false if this version does not
// know k (a kind of a newer peer: not retryable, HTTP status 500).
func Lookup(k Kind) (Row, bool) {
	for _, r := range table {
		if r.Kind == k {
			return r, true
		}
	}
	return Row{}, false
}

// ByProto returns the row whose gRPC form is p, and false if none is
// (KIND_UNSPECIFIED, or a kind of a newer peer).
func ByProto(p tenurepb.Refusal_Kind) (Row, bool) {
	if p == tenurepb.Refusal_KIND_UNSPECIFIED {
		return Row{}, false
	}
	for _, r := range table {
		if r.Proto == p {
			return r, true
		}
	}
	return Row{}, false
}

// KindOf returns the kind of the first row whose Err err matches
// (errors.Is), and "" if none does: the refusal a fencing error stands
// for, whoever met it (a store, a Verifier, a header's parser).
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	for _, r := range table {
		if r.Err != nil && errors.Is(err, r.Err) {
			return r.Kind
		}
	}
	return ""
}
