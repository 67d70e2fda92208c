package router

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/admit"
)

// The router answers every request it does not serve in httpfence's one
// wire format (httpfence.WriteRefusal), and Client reads every answer with
// httpfence.ReadRefusal. Which kind each situation gets is
// router/internal/admit.Decide's, the same decision grpcroute's Server makes;
// each kind's status, retryability and hint are the refusal table's
// (internal/refusal/table.go), and so are the rules of what a hint tells
// and how a refusal is worded (refusal.New). The router's refusals carry,
// in the refusal's "hint" object, the route of the partition's owner (an
// *ownership.WrongOwnerError's): the partition and, when known, the owner
// to try next (never the answering node), its address, epoch and ring
// version:
//
//	"hint": {"partition": 3, "owner": "n2", "addr": "10.0.0.2:7000", "epoch": 41, "ring_version": 7}
//
// "acquiring": true names the answering node itself as the owner that is
// finishing acquiring the partition (a handoff: come back shortly).
// Absent fields are unknown (zero).

// hintRefusal returns the refusal of kind by node self with the hint of
// we (nil: none) as refusal.New tells it: its message is "router: " and
// cause, or words for the kind and hint when cause is empty.
func hintRefusal(kind httpfence.RefusalKind, self string, we *ownership.WrongOwnerError, cause string) *httpfence.Refusal {
	return httpRefusal(refusal.New("router", refusal.Kind(kind), self, admit.HintOf(we), cause))
}

// httpRefusal encodes r for the HTTP wire.
func httpRefusal(r refusal.Refusal) *httpfence.Refusal {
	return &httpfence.Refusal{Kind: httpfence.RefusalKind(r.Kind), Message: r.Message, Hint: r.JSON(),
		Scope: r.Scope, Presented: r.Presented, Current: r.Current}
}

// refusalHint returns the wrong-owner error a refusal's hint stands for,
// as the refusal table says a client takes it (refusal.DecodeJSON): that
// of every not-owner, handoff or session-lost refusal, and of a stale or
// unavailable refusal whose hint names an owner (as WriteError's do after
// a move); nil otherwise. A hint that is not the router's (a negative
// number, a field of the wrong type) is an error wrapping
// httpfence.ErrInvalidRefusal.
func refusalHint(ref *httpfence.Refusal) (*ownership.WrongOwnerError, error) {
	h, err := refusal.DecodeJSON(refusal.Kind(ref.Kind), ref.Hint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", httpfence.ErrInvalidRefusal, err)
	}
	if h == nil {
		return nil, nil
	}
	we := wrongOwner(h)
	we.SessionLost = ref.Kind == httpfence.RefusalSessionLost
	return we, nil
}

// wrongOwner returns the wrong-owner error of hint h.
func wrongOwner(h *refusal.Hint) *ownership.WrongOwnerError {
	return &ownership.WrongOwnerError{
		Route:     fleet.Route{Partition: h.Partition, Owner: h.Owner, Addr: h.Addr, Epoch: h.Epoch, RingVersion: h.RingVersion},
		Acquiring: h.Acquiring,
	}
}

// routedKey is the context key of the *routed of a request a Handler
// serves locally.
type routedKey struct{}

// routed is what WriteError needs to know of a request served locally.
type routed struct {
	r      *Router
	key    string
	caller context.Context // the request's own context, before the work's
}

// WriteError answers a request that a Handler's local handler served, with
// the refusal that err stands for, and reports whether it answered. It is
// tenure's one writer of a handler's errors: local handlers call it with
// the error of their work. The kind is router/internal/admit.Decide's, as
// grpcroute's Server decides it for a gRPC handler's error:
//
//   - A write the store refused as stale (errors.Is(err, fence.ErrStale))
//     is answered 409 with httpfence.RefusalStale, the stale token's
//     details and the hint of the partition's next owner.
//   - Work cut short because its tenure ended (ownership.Ended: err is
//     ownership.ErrMoved or ErrLost, or the request's context error while
//     the context's cause is the end of the tenure) is answered 503 with
//     httpfence.RefusalHandoff (moved, or the node is closing) or
//     RefusalSessionLost (lost), with the hint.
//   - etcd could not serve the work's call for now (no leader, a leader
//     change, an etcd-side timeout: internal/etcderr.Unavailable) while
//     the request still waits: 503 with httpfence.RefusalUnavailable.
//     Whether a write failed so was applied is unknown, which is why
//     retries carry the same idempotency key.
//   - Any other refusal (an invalid or missing token, a refusal relayed
//     from a fenced service) is written as httpfence.RefusalOf words it.
//
// All of the first three are retryable: Client sends the request again, with
// the same idempotency key, to the partition's new owner, so that a planned
// move never fails at the caller. For any other error, or a nil w, it
// writes nothing and returns false. A request not served through a Handler
// gets the same answers without the hint.
func WriteError(w http.ResponseWriter, req *http.Request, err error) bool {
	if nilness.Is(w) || err == nil {
		return false
	}
	s := admit.Situation{Err: err, Work: context.Background()}
	var rt *routed
	if req != nil {
		s.Caller, s.Work = req.Context(), req.Context()
		if rt, _ = req.Context().Value(routedKey{}).(*routed); rt != nil {
			s.Self, s.Caller = rt.r.id, rt.caller
		}
	}
	kind := admit.Decide(s)
	if row, ok := refusal.Lookup(kind); !ok || row.Route == refusal.NoRoute {
		ref := httpfence.RefusalOf(err) // the error's own refusal: a token's, or one relayed
		return ref != nil && httpfence.WriteRefusal(w, ref) == nil
	}
	var route *ownership.WrongOwnerError
	if rt != nil {
		route = &ownership.WrongOwnerError{Route: rt.r.node.Lookup(rt.key)}
		rt.r.refused.Add(1)
	}
	ref := refusal.New("router", kind, s.Self, admit.HintOf(route), err.Error())
	ref.SetToken(err)
	return httpfence.WriteRefusal(w, httpRefusal(ref)) == nil
}
