package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
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
// Every one of them is Retryable, and carries the partition and, when
// known, the owner to try next (never the answering node), its address,
// epoch and ring version.

// hintRefusal returns a refusal of kind with the hint of we. The hint
// names node self only in a handoff refusal while self is acquiring the
// partition (Acquiring: come back shortly); otherwise an owner that is self
// is left out, so that a refusal never sends the caller back to the node
// that refused.
func hintRefusal(kind httpfence.RefusalKind, self string, we *ownership.WrongOwnerError, msg string) *httpfence.Refusal {
	ref := &httpfence.Refusal{Kind: kind, Message: msg}
	if we == nil {
		return ref
	}
	if we.Owner == self && !(kind == httpfence.RefusalHandoff && we.Acquiring) {
		c := *we
		c.Owner, c.Addr, c.Epoch = "", "", 0
		we = &c
	}
	ref.Partition, ref.RingVersion = we.Partition, we.RingVersion
	ref.Owner, ref.Addr, ref.Epoch = we.Owner, we.Addr, we.Epoch
	ref.Acquiring = we.Acquiring && we.Owner == self
	if msg == "" {
		ref.Message = refusalMessage(kind, ref)
	}
	return ref
}

// refusalMessage words a refusal of the router by its cause: a node that
// does not own the partition says so and names the owner; a partition
// changing hands names the next owner; one that no node serves is
// unavailable, not "not the owner".
func refusalMessage(kind httpfence.RefusalKind, ref *httpfence.Refusal) string {
	owner := ""
	if ref.Owner != "" {
		owner = fmt.Sprintf(" %q", ref.Owner)
		if ref.Addr != "" {
			owner += " at " + ref.Addr
		}
		if ref.Epoch != 0 {
			owner += " epoch " + strconv.FormatInt(ref.Epoch, 10)
		}
	}
	switch {
	case kind == httpfence.RefusalHandoff && ref.Acquiring:
		return fmt.Sprintf("router: partition %d is changing owner: this node%s is acquiring it", ref.Partition, owner)
	case kind == httpfence.RefusalHandoff && owner != "":
		return fmt.Sprintf("router: partition %d is changing owner: next owner%s", ref.Partition, owner)
	case owner == "":
		return fmt.Sprintf("router: unavailable: no node serves partition %d yet (%s)", ref.Partition, kind)
	}
	return fmt.Sprintf("router: not the owner of partition %d: owner%s", ref.Partition, owner)
}

// refusalHint returns the wrong-owner error a refusal's hint stands for:
// that of every not-owner, handoff or session-lost refusal, and of a stale
// refusal that names the owner (as WriteError's do); nil otherwise.
func refusalHint(ref *httpfence.Refusal) *ownership.WrongOwnerError {
	switch ref.Kind {
	case httpfence.RefusalNotOwner, httpfence.RefusalHandoff, httpfence.RefusalSessionLost:
	case httpfence.RefusalStale:
		if ref.Owner == "" {
			return nil
		}
	default:
		return nil
	}
	return &ownership.WrongOwnerError{Partition: ref.Partition, Owner: ref.Owner, Addr: ref.Addr,
		Epoch: ref.Epoch, RingVersion: ref.RingVersion, Acquiring: ref.Acquiring,
		SessionLost: ref.Kind == httpfence.RefusalSessionLost}
}

// tenureEnded reports whether err, returned by work admitted under the
// work context wctx, says that the work was refused or cut short because
// its tenure ended: a store refused its write as stale (fence.ErrStale),
// it reports ownership.ErrMoved or ErrLost, or it reports its context's
// end while that context's cause is the end of the tenure (ErrMoved,
// ErrLost or ErrClosed).
func tenureEnded(wctx context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, fence.ErrStale), errors.Is(err, ownership.ErrMoved), errors.Is(err, ownership.ErrLost):
		return true
	case wctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		c := context.Cause(wctx)
		return errors.Is(c, ownership.ErrMoved) || errors.Is(c, ownership.ErrLost) || errors.Is(c, ownership.ErrClosed)
	}
	return false
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
// the refusal that err stands for, and reports whether it answered. Local
// handlers call it with the error of their work:
//
//   - A write the store refused as stale (errors.Is(err, fence.ErrStale))
//     is answered 409 with httpfence.RefusalStale, the stale token's
//     details and the hint of the partition's next owner.
//   - Work cut short because its tenure ended (err is ownership.ErrMoved or
//     ErrLost, or the request's context error while the context's cause is
//     the end of the tenure) is answered 503 with httpfence.RefusalHandoff
//     (moved, or the node is closing) or RefusalSessionLost (lost), with
//     the hint.
//   - etcd could not serve the work's call for now (no leader, a leader
//     change, an etcd-side timeout: internal/etcderr.Unavailable) while
//     the request still waits: 503 with httpfence.RefusalUnavailable.
//     Whether a write failed so was applied is unknown, which is why
//     retries carry the same idempotency key.
//   - Any other refusal (an invalid or missing token) is written as
//     httpfence.WriteError writes it.
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
	ended := tenureEnded(ctx, err)
	if !ended && !(etcderr.Unavailable(err) && ctx.Err() == nil) {
		return httpfence.WriteError(w, err)
	}
	kind := httpfence.RefusalHandoff
	switch {
	case !ended:
		kind = httpfence.RefusalUnavailable
	case errors.Is(err, fence.ErrStale):
		kind = httpfence.RefusalStale
	case errors.Is(err, ownership.ErrLost), errors.Is(context.Cause(ctx), ownership.ErrLost):
		kind = httpfence.RefusalSessionLost
	}
	var ref *httpfence.Refusal
	if rt != nil {
		route := rt.r.node.Lookup(rt.key)
		we := &ownership.WrongOwnerError{Partition: route.Partition, Owner: route.Owner, Addr: route.Addr,
			Epoch: route.Epoch, RingVersion: route.RingVersion}
		ref = hintRefusal(kind, rt.r.id, we, "router: "+err.Error())
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
