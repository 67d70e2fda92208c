package election

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig reports a SessionConfig or ElectionConfig that cannot
	// be used. The message names the offending values.
	ErrInvalidConfig = errors.New("election: invalid config")

	// ErrInvalidName reports an election name that cannot be used: empty,
	// containing '/' or NUL, or not a valid fence scope once prefixed with
	// "leader/". It wraps ErrInvalidConfig.
	ErrInvalidName = fmt.Errorf("%w: invalid election name", ErrInvalidConfig)

	// ErrNilArgument reports a nil etcd client interface (clientv3.Lease,
	// clientv3.KV or clientv3.Watcher) passed to a constructor, or one
	// holding a nil pointer (such as a nil *clientv3.Client).
	ErrNilArgument = errors.New("election: nil argument")

	// ErrSessionDone reports that a Session has ended. Every reason a session
	// ends for (ErrSessionExpired, ErrLeaseLost, ErrSessionClosed) wraps it,
	// so errors.Is(err, ErrSessionDone) holds for all of them.
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

	// ErrKeyRemoved reports a session that its owner ended with
	// Session.EndKeyRemoved: a key it had bound to the lease (a node's
	// member key) was deleted or replaced by someone else while the lease
	// lived. It wraps ErrSessionDone.
	ErrKeyRemoved = fmt.Errorf("%w: a key bound to the lease was removed", ErrSessionDone)

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

	// ErrKeyDeleted reports a term (or a candidacy) whose leader key was
	// deleted or replaced by someone else, for example by an operator. It
	// wraps ErrNotLeader.
	ErrKeyDeleted = fmt.Errorf("%w: leader key deleted", ErrNotLeader)

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
