package grpcroute

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/ownership"
)

// A node answers every call it does not serve with a status whose one
// detail is a *tenurepb.Refusal (proto message tenure.v1.Refusal) naming
// the key's partition and, when known, the owner to try next (never the
// refusing node, unless it is finishing acquiring the partition), its
// address, epoch and ring version:
//
//	situation                                           kind          code
//	the node does not own the key's partition           NOT_OWNER     Unavailable
//	partition releasing, acquiring or owner unknown,    HANDOFF       Unavailable
//	  or the call's context ended during the wait
//	node lost its session, is closed, or Server closed  SESSION_LOST  Unavailable
//	handler's write refused stale (fence.ErrStale)      STALE         Aborted
//	handler cut short: tenure moved or node closing     HANDOFF       Unavailable
//	handler cut short: tenure lost                      SESSION_LOST  Unavailable
//	handler's etcd call unavailable (no leader, ...)    UNAVAILABLE   Unavailable
//
// Every one of them is retryable: the call was not applied (a STALE
// write did not happen, a refused call never ran) or, for UNAVAILABLE and
// a handler cut short, may have been, which is why every attempt carries
// the same idempotency key.

// codeOf returns the status code of a refusal of kind.
func codeOf(kind tenurepb.Refusal_Kind) codes.Code {
	if kind == tenurepb.Refusal_STALE {
		return codes.Aborted
	}
	return codes.Unavailable
}

// refusal returns the refusal of kind by node self, with the hint of we
// (nil: none).
func refusal(kind tenurepb.Refusal_Kind, self string, we *ownership.WrongOwnerError) *tenurepb.Refusal {
	ref := &tenurepb.Refusal{Kind: kind, Retryable: true}
	if we == nil {
		return ref
	}
	ref.Partition = uint32(max(we.Partition, 0))
	ref.Owner, ref.Addr, ref.Epoch, ref.RingVersion = we.Owner, we.Addr, we.Epoch, we.RingVersion
	if ref.Owner == self && !(kind == tenurepb.Refusal_HANDOFF && we.Acquiring) {
		ref.Owner, ref.Addr, ref.Epoch = "", "", 0
	}
	ref.Acquiring = we.Acquiring && ref.Owner == self && self != ""
	return ref
}

// statusOf returns the status error that carries ref, with message msg
// or, when msg is empty, one worded from ref.
func statusOf(ref *tenurepb.Refusal, msg string) error {
	if msg == "" {
		msg = refusalMessage(ref)
	}
	st, err := status.New(codeOf(ref.Kind), msg).WithDetails(ref)
	if err != nil {
		return status.Error(codeOf(ref.Kind), msg) // unreachable: a Refusal always marshals
	}
	return st.Err()
}

// refusalMessage words ref by its cause, as the HTTP router does.
func refusalMessage(ref *tenurepb.Refusal) string {
	owner := ""
	if ref.Owner != "" {
		owner = strconv.Quote(ref.Owner)
		if ref.Addr != "" {
			owner += " at " + ref.Addr
		}
		if ref.Epoch != 0 {
			owner += " epoch " + strconv.FormatInt(ref.Epoch, 10)
		}
	}
	switch {
	case ref.Kind == tenurepb.Refusal_HANDOFF && ref.Acquiring:
		return fmt.Sprintf("grpcroute: partition %d is changing owner: this node %s is acquiring it", ref.Partition, owner)
	case ref.Kind == tenurepb.Refusal_HANDOFF && owner != "":
		return fmt.Sprintf("grpcroute: partition %d is changing owner: next owner %s", ref.Partition, owner)
	case ref.Kind == tenurepb.Refusal_SESSION_LOST:
		return fmt.Sprintf("grpcroute: session lost: partition %d, next owner %s", ref.Partition, owner)
	case owner == "":
		return fmt.Sprintf("grpcroute: unavailable: no node serves partition %d yet (%s)", ref.Partition, ref.Kind)
	}
	return fmt.Sprintf("grpcroute: not the owner of partition %d: owner %s", ref.Partition, owner)
}

// RefusalOf returns the tenure refusal that err's gRPC status carries
// as a detail, or nil if it carries none. err may wrap the status error
// (as a Client's ErrRetriesExhausted does).
func RefusalOf(err error) *tenurepb.Refusal {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return nil
	}
	for _, d := range st.Details() {
		if ref, ok := d.(*tenurepb.Refusal); ok {
			return ref
		}
	}
	return nil
}

// hintOf returns the route a refusal names as the next owner, or the zero
// Route if it names none that a call can be sent to.
func hintOf(ref *tenurepb.Refusal) fleet.Route {
	if ref == nil || ref.Owner == "" || ref.Addr == "" || ref.Epoch < 0 {
		return fleet.Route{}
	}
	return fleet.Route{Partition: int(ref.Partition), Owner: ref.Owner, Addr: ref.Addr, Epoch: ref.Epoch, RingVersion: ref.RingVersion}
}

// staleDetails copies the stale token's details of err into ref.
func staleDetails(ref *tenurepb.Refusal, err error) {
	var se *fence.StaleError
	if errors.As(err, &se) && fence.ValidateScope(se.Scope) == nil && se.Presented > 0 && se.Current >= 0 {
		ref.Scope, ref.Presented, ref.Current = se.Scope, se.Presented, se.Current
	}
}
