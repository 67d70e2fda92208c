package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership"
)

// The router answers every request it does not serve in httpfence's one
// wire format (httpfence.WriteRefusal), and Client reads every answer with
// httpfence.ReadRefusal. The router's situations map to refusal kinds so:
//
//	situation                                         kind          status
//	forwarded request on a node that does not own it  not-owner     421
//	partition releasing, acquiring or owner unknown,  handoff       503
//	  handoff wait ended by the request's context,
//	  or the owner could not be reached by a forward
//	node lost its session (or etcd outage)            session-lost  503
//	  closed Router, closed node
//	local write refused stale (WriteError)            stale         409
//	local work cut short: tenure moved (WriteError)   handoff       503
//	local work cut short: tenure lost (WriteError)    session-lost  503
//	handler without router, key func or local         unavailable   503
//
// Every one of them is Retryable. Each of the router's refusals carries,
// in the refusal's "hint" object, the hint of the partition's owner (an
// *ownership.WrongOwnerError's route): the partition and, when known, the
// owner to try next (never the answering node), its address, epoch and
// ring version:
//
//	"hint": {"partition": 3, "owner": "n2", "addr": "10.0.0.2:7000", "epoch": 41, "ring_version": 7}
//
// "acquiring": true names the answering node itself as the owner that is
// finishing acquiring the partition (a handoff: come back shortly).
// Absent fields are unknown (zero).

// wireHint is the "hint" object of the router's refusals.
type wireHint struct {
	Partition   int    `json:"partition"`
	Owner       string `json:"owner,omitempty"`
	Addr        string `json:"addr,omitempty"`
	Epoch       int64  `json:"epoch,omitempty"`
	RingVersion uint64 `json:"ring_version,omitempty"`
	Acquiring   bool   `json:"acquiring,omitempty"`
}

// hintRefusal returns a refusal of kind with the hint of we. The hint
// names node self only in a handoff refusal while self is acquiring the
// partition (acquiring: come back shortly); otherwise an owner that is self
// is left out, so that a refusal never sends the caller back to the node
// that refused.
func hintRefusal(kind httpfence.RefusalKind, self string, we *ownership.WrongOwnerError, msg string) *httpfence.Refusal {
	ref := &httpfence.Refusal{Kind: kind, Message: msg}
	if we == nil {
		return ref
	}
	h := hintOf(kind, self, we)
	ref.Hint, _ = json.Marshal(h) // a struct of strings and numbers always encodes
	if msg == "" {
		ref.Message = refusalMessage(kind, h)
	}
	return ref
}

// hintOf returns the wire hint of we in a refusal of kind by node self, as
// hintRefusal describes.
func hintOf(kind httpfence.RefusalKind, self string, we *ownership.WrongOwnerError) wireHint {
	h := wireHint{Partition: we.Partition, Owner: we.Owner, Addr: we.Addr, Epoch: we.Epoch, RingVersion: we.RingVersion}
	if h.Owner == self && !(kind == httpfence.RefusalHandoff && we.Acquiring) {
		h.Owner, h.Addr, h.Epoch = "", "", 0
	}
	h.Acquiring = we.Acquiring && h.Owner == self
	return h
}

// refusalMessage words a refusal of the router by its cause: a node that
// does not own the partition says so and names the owner; a partition
// changing hands names the next owner; one that no node serves is
// unavailable, not "not the owner".
func refusalMessage(kind httpfence.RefusalKind, h wireHint) string {
	owner := ""
	if h.Owner != "" {
		owner = fmt.Sprintf(" %q", h.Owner)
		if h.Addr != "" {
			owner += " at " + h.Addr
		}
		if h.Epoch != 0 {
			owner += " epoch " + strconv.FormatInt(h.Epoch, 10)
		}
	}
	switch {
	case kind == httpfence.RefusalHandoff && h.Acquiring:
		return fmt.Sprintf("router: partition %d is changing owner: this node%s is acquiring it", h.Partition, owner)
	case kind == httpfence.RefusalHandoff && owner != "":
		return fmt.Sprintf("router: partition %d is changing owner: next owner%s", h.Partition, owner)
	case owner == "":
		return fmt.Sprintf("router: unavailable: no node serves partition %d yet (%s)", h.Partition, kind)
	}
	return fmt.Sprintf("router: not the owner of partition %d: owner%s", h.Partition, owner)
}

// refusalHint returns the wrong-owner error a refusal's hint stands for:
// that of every not-owner, handoff or session-lost refusal, and of a stale
// refusal whose hint names the owner (as WriteError's do); nil otherwise.
// A hint that is not the router's (a negative number, a field of the wrong
// type) is an error wrapping httpfence.ErrInvalidRefusal.
func refusalHint(ref *httpfence.Refusal) (*ownership.WrongOwnerError, error) {
	switch ref.Kind {
	case httpfence.RefusalNotOwner, httpfence.RefusalHandoff, httpfence.RefusalSessionLost, httpfence.RefusalStale:
	default:
		return nil, nil
	}
	we, err := decodeHint(ref.Hint)
	if err != nil || (ref.Kind == httpfence.RefusalStale && we.Owner == "") {
		return nil, err
	}
	we.SessionLost = ref.Kind == httpfence.RefusalSessionLost
	return we, nil
}

// decodeHint returns the wrong-owner error of a refusal's "hint" object
// raw: the zero one if raw is empty.
func decodeHint(raw []byte) (*ownership.WrongOwnerError, error) {
	var h wireHint
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("%w: hint: %w", httpfence.ErrInvalidRefusal, err)
		}
	}
	if h.Partition < 0 || h.Epoch < 0 {
		return nil, fmt.Errorf("%w: hint: negative number (partition %d, epoch %d)", httpfence.ErrInvalidRefusal, h.Partition, h.Epoch)
	}
	return &ownership.WrongOwnerError{
		Route:     fleet.Route{Partition: h.Partition, Owner: h.Owner, Addr: h.Addr, Epoch: h.Epoch, RingVersion: h.RingVersion},
		Acquiring: h.Acquiring,
	}, nil
}

// routedKey is the context key of the *routed of a request a Handler
// serves locally.
type routedKey struct{}

// routed is what WriteError needs to know of a request served locally.
type routed struct {
	r   *Router
	key string
}

// WriteError answers a request that a Handler's local handler served, with
// the refusal that err stands for, and reports whether it answered. It is
// tenure's one writer of a handler's errors: local handlers call it with
// the error of their work:
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
//   - Any other refusal (an invalid or missing token) is written as
//     httpfence.RefusalOf words it.
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
	var (
		ctx = context.Background()
		rt  *routed
	)
	if req != nil {
		ctx = req.Context()
		rt, _ = ctx.Value(routedKey{}).(*routed)
	}
	reason, ended := ownership.Ended(ctx, err)
	if !ended && !(etcderr.Unavailable(err) && ctx.Err() == nil) {
		ref := httpfence.RefusalOf(err)
		return ref != nil && httpfence.WriteRefusal(w, ref) == nil
	}
	kind := httpfence.RefusalHandoff
	switch {
	case !ended:
		kind = httpfence.RefusalUnavailable
	case errors.Is(err, fence.ErrStale):
		kind = httpfence.RefusalStale
	case reason == ownership.ErrLost:
		kind = httpfence.RefusalSessionLost
	}
	var ref *httpfence.Refusal
	if rt != nil {
		ref = hintRefusal(kind, rt.r.id, &ownership.WrongOwnerError{Route: rt.r.node.Lookup(rt.key)}, "router: "+err.Error())
		rt.r.refused.Add(1)
	} else {
		ref = &httpfence.Refusal{Kind: kind, Message: "router: " + err.Error()}
	}
	var se *fence.StaleError
	if kind == httpfence.RefusalStale && errors.As(err, &se) && fence.ValidateScope(se.Scope) == nil &&
		se.Presented > 0 && se.Current >= 0 {
		ref.Scope, ref.Presented, ref.Current = se.Scope, se.Presented, se.Current
	}
	return httpfence.WriteRefusal(w, ref) == nil
}
