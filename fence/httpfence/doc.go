// Package httpfence carries fencing tokens over HTTP, so that services
// downstream of an owner can fence its requests too.
//
// The token travels in the Tenure-Fence-Token header as its text form,
// "<scope>@<epoch>" (fence.Token.String). On the client side, Transport
// attaches the token found in each request's context (fence.NewContext).
// On the server side, Middleware reads the header, admits the token at a
// fence.Gate or a store, and either refuses the request or passes it on
// with the token in its context (fence.FromContext):
//
//	409 Conflict             the token is stale: {"error", "scope", "presented", "current"}
//	400 Bad Request          the header is malformed or the token invalid
//	428 Precondition Required the header is missing (unless Handler.Optional)
//	503 Service Unavailable  the admitter failed (store unreachable, ...)
//
// Refusals carry the Tenure-Fence-Error header, so that a client can tell
// them from the application's own answers with ResponseError, which turns
// a 409 back into a *fence.StaleError.
//
// Admission at the door rejects a stale owner early, but it is not atomic
// with what the handler then writes: a newer owner may be admitted in
// between. Handlers must still fence their writes at the store with the
// token from the request's context, in the same transaction as the write
// (etcdfence, sqlfence, or fence.Gate.Do for state in memory).
package httpfence
