package router

import (
	"net/http"
	"strconv"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
)

// HTTP headers the router reads and writes.
const (
	// HeaderForwarded marks a request forwarded by a router; its value is the
	// forwarding node's ID. A request that carries it is never forwarded
	// again.
	HeaderForwarded = "Tenure-Forwarded"

	// HeaderRingVersion carries the ring version (decimal) of the node that
	// forwarded a request or answered a misdirected one, so that the two
	// sides can tell whether they route with the same view.
	HeaderRingVersion = "Tenure-Ring-Version"

	// HeaderOwner names the owner of the request's partition in a wrong-owner
	// answer.
	HeaderOwner = "Tenure-Owner"

	// HeaderOwnerAddr is the owner's advertised address (host:port) in a
	// wrong-owner answer.
	HeaderOwnerAddr = "Tenure-Owner-Addr"

	// HeaderEpoch is the epoch (decimal) of the owner's claim in a
	// wrong-owner answer, 0 if the owner holds no claim yet.
	HeaderEpoch = "Tenure-Epoch"

	// HeaderPartition is the request's partition (decimal) in a wrong-owner
	// answer.
	HeaderPartition = "Tenure-Partition"

	// HeaderRouteError is set on every answer the router itself produces
	// instead of the application (421, 502, 503), with one of the
	// RouteError* values. Client retries exactly those answers, so an
	// application's own 502 or 503 is passed through to the caller.
	HeaderRouteError = "Tenure-Route-Error"

	// HeaderFenceToken carries the fencing token (fence.Token.String) under
	// which the owner serves the request. The router sets it on requests it
	// serves locally and removes it from requests it forwards, so a value
	// sent by a caller is never trusted. It is the header of package
	// fence/httpfence.
	HeaderFenceToken = httpfence.Header

	// HeaderIdempotencyKey identifies one logical request across the
	// attempts Client makes. Client sets it on every attempt (generating a
	// random key if the request has none); servers dedupe on it.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Values of HeaderRouteError.
const (
	// RouteErrorNotOwner: the node does not own the partition and did not
	// forward the request (status 421).
	RouteErrorNotOwner = "not-owner"
	// RouteErrorNoOwner: no owner with an address is known for the partition
	// (status 503).
	RouteErrorNoOwner = "no-owner"
	// RouteErrorForward: forwarding to the owner failed (status 502); the
	// owner may or may not have received the request.
	RouteErrorForward = "forward-failed"
	// RouteErrorClosed: the node is shutting down (status 503).
	RouteErrorClosed = "closed"
	// RouteErrorTimeout: the request's context ended while the router waited
	// for a handoff (status 503).
	RouteErrorTimeout = "timeout"
)

// writeHint sets the wrong-owner hint headers of e on h.
func writeHint(h http.Header, e *ownership.WrongOwnerError) {
	h.Set(HeaderPartition, strconv.Itoa(e.Partition))
	if e.Owner != "" {
		h.Set(HeaderOwner, e.Owner)
	}
	if e.Addr != "" {
		h.Set(HeaderOwnerAddr, e.Addr)
	}
	h.Set(HeaderEpoch, strconv.FormatInt(e.Epoch, 10))
	if e.RingVersion != 0 {
		h.Set(HeaderRingVersion, strconv.FormatUint(e.RingVersion, 10))
	}
}

// ParseHint reads the wrong-owner hint headers of a router's answer (421,
// 502 or 503 with HeaderRouteError set). ok is false if h carries no
// partition header or a malformed number; missing owner fields are left
// empty.
func ParseHint(h http.Header) (hint *ownership.WrongOwnerError, ok bool) {
	ps := h.Get(HeaderPartition)
	if ps == "" {
		return nil, false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 {
		return nil, false
	}
	e := &ownership.WrongOwnerError{Partition: p, Owner: h.Get(HeaderOwner), Addr: h.Get(HeaderOwnerAddr)}
	if s := h.Get(HeaderEpoch); s != "" {
		if e.Epoch, err = strconv.ParseInt(s, 10, 64); err != nil || e.Epoch < 0 {
			return nil, false
		}
	}
	if s := h.Get(HeaderRingVersion); s != "" {
		if e.RingVersion, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, false
		}
	}
	return e, true
}
