package admit

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
)

// Situation is what a node knows of a request or call that it does not
// serve, or whose handler failed, when Decide chooses the refusal its
// caller gets. Router's Handler and WriteError (HTTP) and grpcroute's
// Server (gRPC) describe their situations with it.
type Situation struct {
	// Self is the node's ID.
	Self string
	// Caller is the context of the request or call; nil is one that has
	// not ended.
	Caller context.Context
	// Closed says the Router or Server is closed: the node was not asked.
	Closed bool
	// Err is the node's answer when Hold did not admit the work (Hint is
	// then Hold's hint), the error of forwarding the request to Hint's
	// node (Unreachable), or the handler's error (Work).
	Err  error
	Hint *ownership.WrongOwnerError
	// Unreachable says the request was forwarded to Hint's node, which
	// could not be reached (it may or may not have received it).
	Unreachable bool
	// Work, when not nil, is the context an admitted request ran under;
	// Err is then its handler's error.
	Work context.Context
}

// Decide returns the kind of refusal s gets, "" for none (the handler's
// error is its own):
//
//	situation                                            kind
//	Router or Server closed                              session-lost
//	not admitted (Hold's answer, Hint):
//	  the caller went away during the handoff wait       handoff
//	  node lost its session or closed                    session-lost
//	  another node owns it and is not mid-handoff        not-owner
//	  partition releasing, acquiring, or owner unknown   handoff
//	forwarded to an owner that could not be reached      handoff
//	admitted, its handler failed with Err:
//	  a write refused stale (fence.ErrStale)             stale
//	  cut short by the end of its tenure: moved, closed  handoff
//	  cut short by the end of its tenure: session lost   session-lost
//	  etcd unavailable while the caller waits            unavailable
//	  an invalid, missing or unverified token            invalid-token, no-token, unverified
//	  anything else                                      "" (none)
//
// A request that may still be forwarded (HTTP, not forwarded yet) to
// another node that owns it is forwarded, not refused: the router decides
// that before it asks Decide. The end of a tenure is ownership.Ended under
// Work; a status error Canceled or DeadlineExceeded (a stream cut short)
// counts when Work ended with such a cause while the caller waits.
func Decide(s Situation) refusal.Kind {
	caller := s.Caller
	if caller == nil {
		caller = context.Background()
	}
	waits := caller.Err() == nil
	switch {
	case s.Closed:
		return refusal.SessionLost
	case s.Work != nil:
		return decideServed(s.Work, waits, s.Err)
	case s.Unreachable || !waits:
		return refusal.Handoff
	}
	_, nodeEnded := ownership.Ended(context.Background(), s.Err) // closed, or its session lost
	switch {
	case nodeEnded:
		return refusal.SessionLost
	case Elsewhere(s.Hint, s.Self) && !s.Hint.Releasing && !s.Hint.Acquiring:
		return refusal.NotOwner
	}
	return refusal.Handoff
}

// decideServed is Decide for a handler's error err under the work context
// work; waits says the caller still waits.
func decideServed(work context.Context, waits bool, err error) refusal.Kind {
	reason, ended := ownership.Ended(work, err)
	if code := status.Code(err); !ended && waits && (code == codes.Canceled || code == codes.DeadlineExceeded) {
		reason, ended = ownership.Ended(work, context.Canceled) // the stream's own error for its ended context
	}
	switch {
	case !ended && waits && etcderr.Unavailable(err):
		return refusal.Unavailable
	case !ended:
		return refusal.KindOf(err)
	case errors.Is(err, fence.ErrStale):
		return refusal.Stale
	case errors.Is(reason, ownership.ErrLost):
		return refusal.SessionLost
	}
	return refusal.Handoff
}

// Elsewhere reports whether the node's answer we names another node than
// self, with an address, as the owner: one a request can be sent to.
func Elsewhere(we *ownership.WrongOwnerError, self string) bool {
	return we != nil && we.Owner != "" && we.Addr != "" && we.Owner != self
}

// HintOf returns the route of we as a refusal's hint (refusal.New tells
// it by the rules), nil for a nil we.
func HintOf(we *ownership.WrongOwnerError) *refusal.Hint {
	if we == nil {
		return nil
	}
	return &refusal.Hint{Partition: we.Partition, Owner: we.Owner, Addr: we.Addr, Epoch: we.Epoch,
		RingVersion: we.RingVersion, Acquiring: we.Acquiring}
}
