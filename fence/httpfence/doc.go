// Package httpfence carries fencing tokens over HTTP, so that services
// downstream of an owner can fence its requests too, and defines the one
// wire format of tenure's refusals.
//
// The token travels in the Tenure-Fence-Token header as its text form,
// "<scope>@<epoch>" (fence.Token.String), and the fleet's signature of it,
// when the fleet signs (fence.Signer), in the Tenure-Fence-Signature
// header ("<key ID>:<base64url>", fence.Signature.String). On the client
// side, Transport attaches the token and signature found in each request's
// context (fence.NewContext, fence.NewSignedContext; a node's partition
// contexts carry both). On the server side, a Handler (New) reads the headers,
// asks a Verifier whether the fleet issued the token, advances a
// fence.Fencer (a store, or a *fence.Gate) to it, and
// either refuses the request or passes it on with the token and signature
// in its context (fence.FromContext, fence.SignatureFromContext).
//
// A Handler admits only tokens it can verify, because a floor raised by a
// made-up token shuts the real holder out: anyone who can reach the
// service could otherwise send "p/5@<the owner's epoch + 1>" and take the
// scope over. A token the Verifier cannot verify is refused (403,
// RefusalUnverified) and never reaches the Fencer. Two verifiers come with
// tenure: *fence.SignatureVerifier checks the fleet's Ed25519 signature
// with public keys alone (for services that cannot reach etcd), and
// *fleet.Observer checks the epoch against its watched view of the
// fleet's claims (partition scopes; leader scopes need signatures).
// Admitting unverified tokens takes InsecureNoVerify, for a network where
// every caller is trusted. A verified token shows that the fleet issued
// it, not who presents it: a signature is a bearer credential, to be sent
// over TLS.
//
// A Handler counts what it admits and refuses when Config.Metrics names a
// registry (tenure_fence_admitted_total, tenure_fence_rejections_total
// and, by reason, tenure_fence_verify_refusals_total, with store="http";
// Handlers given one registry share them), and logs the tokens its
// Verifier refuses when Config.Logger is set (never their signatures).
//
// Refusal is the one HTTP wire format of tenure's refusals, for this
// package and for routers alike: WriteRefusal writes it (a status by kind,
// the Tenure-Refusal header naming the kind, and a JSON body with the
// message and what the caller needs next) and ReadRefusal, the one
// decoder, reads it back. Each kind is one row of tenure's refusal table
// (internal/refusal/table.go; see the README's table), which the gRPC wire
// shares: its status, whether it is retryable (Refusal.Retryable), the
// fencing error it stands for, and whether it carries a hint. This package
// knows tokens and their staleness; the router's answers also carry a
// "hint" object naming where the request goes instead, which this package
// carries without reading (see package router).
//
//	409 Conflict               stale: {"kind", "message", "scope", "presented", "current", "hint"}
//	421 Misdirected Request    not-owner: {"kind", "message", "hint"}
//	503 Service Unavailable    handoff, session-lost, unavailable (with Retry-After)
//	400 Bad Request            invalid-token: the header is malformed or the token invalid
//	403 Forbidden              unverified: the Verifier cannot show the fleet issued the token
//	428 Precondition Required  no-token: the header is missing (unless Config.Optional)
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
