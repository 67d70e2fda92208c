package router

// HTTP headers the router reads and writes. The fencing token travels in
// httpfence's headers: the router sets httpfence.Header (the token under
// which the owner serves the request) and httpfence.SignatureHeader (the
// fleet's signature of it, when the node signs its tokens) on requests it
// serves locally, and removes both from requests it forwards, so a value
// sent by a caller is never trusted. Refusals travel in httpfence's one
// wire format (httpfence.RefusalHeader and a JSON body, see
// httpfence.WriteRefusal), not in headers of the router's own.
const (
	// headerForwarded marks a request forwarded by a router; its value is
	// the forwarding node's ID. A request that carries it is never
	// forwarded again.
	headerForwarded = "Tenure-Forwarded"

	// headerRingVersion carries the ring version (decimal) of the node that
	// forwarded a request, so that the owner can tell whether both route
	// with the same view. (A refusal carries its ring version in its body.)
	headerRingVersion = "Tenure-Ring-Version"

	// HeaderIdempotencyKey identifies one logical request across the
	// attempts Client makes. Client sets it on every attempt (generating a
	// random key if the request has none); servers dedupe on it.
	HeaderIdempotencyKey = "Idempotency-Key"
)
