package grpcroute

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

// A node answers every call it does not serve with a status whose one
// detail is a *tenurepb.Refusal (proto message tenure.v1.Refusal) naming
// the key's partition and, when known, the owner to try next (never the
// refusing node, unless it is finishing acquiring the partition), its
// address, epoch and ring version. Which kind a call gets is
// router/internal/admit.Decide's, the decision the HTTP router makes too; each
// kind's status code, proto value, retryability and hint are the refusal
// table's (internal/refusal/table.go), where the kinds that exist on the
// HTTP wire only (invalid-token, no-token, unverified) have no gRPC form:
// a handler's error of those kinds is returned as it is.

// statusOf returns the status error that carries r: the table's code for
// r's kind, r's message, and r's Proto detail. A kind without a gRPC form
// (which the Server never refuses with) is an Internal error, never a
// status without an error.
func statusOf(r refusal.Refusal) error {
	row, _ := refusal.Lookup(r.Kind)
	detail := r.Proto()
	if detail == nil {
		return status.Errorf(codes.Internal, "grpcroute: refusal %q has no gRPC form: %s", r.Kind, r.Message)
	}
	st, err := status.New(row.Code, r.Message).WithDetails(detail)
	if err != nil {
		return status.Error(row.Code, r.Message) // unreachable: a Refusal always marshals
	}
	return st.Err()
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

// hintOf returns the route a refusal names as the next owner, as the
// refusal table says a client takes it (refusal.FromProto), or the zero
// Route if it names none that a call can be sent to. A hint that is not a
// route is none: it is advice from the network.
func hintOf(ref *tenurepb.Refusal) fleet.Route {
	_, h, err := refusal.FromProto(ref)
	if err != nil || h == nil || h.Owner == "" || h.Addr == "" {
		return fleet.Route{}
	}
	return fleet.Route{Partition: h.Partition, Owner: h.Owner, Addr: h.Addr, Epoch: h.Epoch, RingVersion: h.RingVersion}
}

// retryable reports whether the refusal table says a refusal of ref's
// kind is retried: false for a kind this version does not know, whatever
// the refusal's own retryable field says.
func retryable(ref *tenurepb.Refusal) bool {
	row, _, _ := refusal.FromProto(ref)
	return row.Retryable
}
