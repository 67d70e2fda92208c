package election

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig reports a SessionConfig or ElectionConfig that cannot
	// be used, an invalid election name included (empty, containing '/' or
	// NUL, or not a valid fence scope once prefixed with "leader/"). The
	// message names the offending values.
	ErrInvalidConfig = errors.New("election: invalid config")

	// ErrNilArgument reports a nil etcd client interface (clientv3.Lease,
	// clientv3.KV or clientv3.Watcher) passed to a constructor, or one
	// holding a nil pointer (such as a nil *clientv3.Client).
	ErrNilArgument = errors.New("election: nil argument")

	// ErrSessionDone reports that a Session has ended. Every error a session
	// ends with wraps it: ErrSessionExpired, ErrLeaseLost and
	// ErrSessionClosed do, and so does the end Session.EndKeyDeleted brings
	// (which also wraps ErrKeyDeleted), so errors.Is(err, ErrSessionDone)
	// holds for all of them.
	ErrSessionDone = errors.New("election: session ended")

	// ErrSessionExpired reports that the session's safe deadline passed
	// without an acknowledged renewal, typically because etcd could not be
	// reached. etcd may still hold the lease for a little longer, but the
	// node must behave as if it had lost it. It wraps ErrSessionDone.
	ErrSessionExpired = fmt.Errorf("%w: safe deadline passed without an acknowledged renewal", ErrSessionDone)

	// ErrLeaseLost reports that etcd no longer has the session's lease: it was
	// revoked, or it expired server-side and etcd reported it missing. It
	// wraps ErrSessionDone.
	ErrLeaseLost = fmt.Errorf("%w: lease lost", ErrSessionDone)

	// ErrSessionClosed reports that the session was closed by its owner. It
	// wraps ErrSessionDone.
	ErrSessionClosed = fmt.Errorf("%w: closed", ErrSessionDone)

	// ErrCheckFailed reports a Session.Check that could not ask etcd about
	// the lease; the session is as it was.
	ErrCheckFailed = errors.New("election: cannot check the lease")

	// ErrNoLeader reports that an election currently has no leader.
	ErrNoLeader = errors.New("election: no leader")

	// ErrNotLeader reports that a term has ended: it was resigned, its
	// session ended, or its leader key was deleted. Term.Err and the cause of
	// a term's context wrap it, together with the specific reason.
	ErrNotLeader = errors.New("election: not leader")

	// ErrResigned reports a term ended by Resign. It wraps ErrNotLeader.
	ErrResigned = fmt.Errorf("%w: resigned", ErrNotLeader)

	// ErrKeyDeleted reports a key bound to a session's lease that someone
	// else (an operator, say) deleted or replaced while the lease lived. It
	// ends what the key stood for, and the error says which end it brought:
	//
	//   - a term's (or a candidacy's) leader key: the term ends, and the
	//     error also wraps ErrNotLeader;
	//   - a key the session's owner bound to the lease (a node's member
	//     key), reported with Session.EndKeyDeleted: the session ends, and
	//     the error also wraps ErrSessionDone.
	ErrKeyDeleted = errors.New("election: key deleted by someone else")

	// ErrFence reports a term that was won but given up because one of
	// ElectionConfig.Fencers could not be advanced to its token. The leader
	// key was deleted (or, if etcd failed that too, goes with the lease or
	// with the next Campaign); the error also wraps the fencer's error, and
	// names the fencer's index.
	ErrFence = errors.New("election: fencer failed")

	// ErrForeignFencer reports a fencer of ElectionConfig.Fencers whose
	// floors live in etcd under another fleet's fence prefix (an
	// etcdfence.Store configured with another Cluster or ClusterPrefix): its
	// floors would compare the election's tokens with another fleet's.
	// Validate refuses it, wrapped in ErrInvalidConfig.
	ErrForeignFencer = errors.New("election: fencer belongs to another fleet")

	// ErrNoSession reports Campaign or Run on an Election created without a
	// Session, which can only observe.
	ErrNoSession = errors.New("election: no session: this election can only observe")

	// ErrMetrics reports metrics that could not be registered with the
	// prometheus.Registerer given (SessionConfig.Metrics, ElectionConfig.Metrics):
	// the error also wraps the registry's, a
	// prometheus.AlreadyRegisteredError when metrics with the same names and
	// labels are registered already (another Election of the same name and
	// candidate ID not yet closed, say).
	ErrMetrics = errors.New("election: cannot register metrics")

	// ErrElectionClosed reports Campaign or Run on an Election after Close.
	ErrElectionClosed = errors.New("election: election closed")

	// ErrAlreadyCampaigning reports a Campaign on an Election that already
	// has a campaign in progress or a term that has not ended. One Election
	// holds at most one candidacy at a time.
	ErrAlreadyCampaigning = errors.New("election: a campaign or term is already active")
)

// The two ends a deleted key brings, each wrapping ErrKeyDeleted (see
// there).
var (
	errLeaderKeyDeleted = fmt.Errorf("%w: %w", ErrNotLeader, ErrKeyDeleted)   // a term's leader key
	errBoundKeyDeleted  = fmt.Errorf("%w: %w", ErrSessionDone, ErrKeyDeleted) // a key the session's owner bound
)
