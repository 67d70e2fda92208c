package cluster

import "errors"

var (
	// ErrInvalidConfig reports a Config that cannot start a cluster.
	ErrInvalidConfig = errors.New("cluster: invalid config")
	// ErrNoMember reports a member index out of range.
	ErrNoMember = errors.New("cluster: no such member")
	// ErrNoLeader reports that no member currently leads the cluster.
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrMemberStopped reports an operation on a member that is not running:
	// stopped, killed, exited or still starting.
	ErrMemberStopped = errors.New("cluster: member stopped")
	// ErrMemberRunning reports a restart of a member that is running.
	ErrMemberRunning = errors.New("cluster: member running")
	// ErrMemberFrozen reports an operation that a frozen member cannot take:
	// a second freeze, a graceful stop, a restart. Thaw or kill it first.
	ErrMemberFrozen = errors.New("cluster: member frozen")
	// ErrMemberNotFrozen reports a thaw of a member that is not frozen.
	ErrMemberNotFrozen = errors.New("cluster: member not frozen")
	// ErrNotProcess reports an operation that needs a member running in its
	// own process (Config.Processes) on an embedded member.
	ErrNotProcess = errors.New("cluster: member is not a process")
	// ErrClosed reports an operation on a closed Cluster.
	ErrClosed = errors.New("cluster: closed")
)
