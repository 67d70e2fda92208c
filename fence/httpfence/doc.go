// Package httpfence carries fencing tokens over HTTP, so that services
// downstream of an owner can fence its requests too, and defines the one
// wire format of tenure's refusals.
//
// The token travels in the Tenure-Fence-Token header as its text form,
// "<scope>@<epoch>" (fence.Token.String). On the client side, Transport
// attaches the token found in each request's context (fence.NewContext).
// On the server side, Middleware reads the header, advances a
// fence.Fencer (a store, or a fence.Gate through Gate.Fencer) to the
// token, and either refuses the request or passes it on with the token in
// its context (fence.FromContext).
//
// A Handler counts what it admits and refuses when its Metrics field is set
// (NewMetrics registers tenure_fence_admitted_total and
// tenure_fence_rejections_total, with store="http", with a registry the
// caller passes).
//
// Refusal is the one wire format of tenure's refusals, for this package and
// for routers alike: WriteRefusal writes it (a status by kind, the
// Tenure-Refusal header naming the kind, and a JSON body with the message
// and what the caller needs next) and ReadRefusal, the one decoder, reads
// it back.
//
//	409 Conflict               stale: {"kind", "message", "scope", "presented", "current"}
//	421 Misdirected Request    not-owner: {"kind", "message", "partition", "owner", "addr", "epoch", "ring_version"}
//	503 Service Unavailable    handoff, session-lost, unavailable (with Retry-After)
//	400 Bad Request            invalid-token: the header is malformed or the token invalid
//	428 Precondition Required  no-token: the header is missing (unless Handler.Optional)
//
// A response without the Tenure-Refusal header is the application's own
// answer. ResponseError turns a refusal back into an error, for which
// errors.Is(err, fence.ErrStale) holds when the token was stale.
//
// Fencing at the door rejects a stale owner early, but it is not atomic
// with what the handler then writes: a newer owner may be admitted in
// between. Handlers must still fence their writes at the store with the
// token from the request's context, in the same transaction as the write
// (etcdfence, sqlfence, or fence.Gate.Do for state in memory).
package httpfence
