package cluster

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

// MemberState is where one member is in its lifecycle.
type MemberState int

const (
	// MemberStopped: not running. Never started, stopped, killed, or its
	// process exited on its own. RestartMember starts it again.
	MemberStopped MemberState = iota
	// MemberStarting: launched, not serving yet.
	MemberStarting
	// MemberRunning: serving requests.
	MemberRunning
	// MemberFrozen: a process member stopped by SIGSTOP. It keeps its
	// state and its sockets but answers nothing, the way a paused VM or a
	// process in a long GC pause does, until ThawMember.
	MemberFrozen
)

// String returns the state's name.
func (s MemberState) String() string {
	switch s {
	case MemberStopped:
		return "stopped"
	case MemberStarting:
		return "starting"
	case MemberRunning:
		return "running"
	case MemberFrozen:
		return "frozen"
	}
	return fmt.Sprintf("MemberState(%d)", int(s))
}

// member is one etcd member of the cluster. Its fields are guarded by the
// Cluster's mu. state is its one lifecycle variable; run is non-nil unless
// state is MemberStopped.
type member struct {
	index int
	spec  memberspec.Spec
	state MemberState
	id    uint64 // etcd member ID, known once it first served; ReplaceMember makes a new one
	run   run
	// command, if set, is the command line this process member runs
	// instead of the cluster's (SetMemberBinary).
	command []string
	// replacements counts the ReplaceMember calls on this index.
	replacements int
}

// run is one run of a member, from launch until it ends: an embedded server
// or a child process. Whoever takes a run out of member.run (under the
// Cluster's mu) ends it, exactly once: halt then close, or stop.
type run interface {
	// wait waits until the member serves requests and returns its ID.
	wait(ctx context.Context) (uint64, error)
	// leader returns the leader's ID as the member last saw it; 0: none.
	leader() uint64
	// halt stops raft at once, without a word to the peers.
	halt()
	// close releases what is left once halted; a process is reaped.
	close()
	// stop stops gracefully: a leader first hands leadership to a peer.
	stop()
}

// embedded is a run inside this process.
type embedded struct{ e *embed.Etcd }

func (r embedded) wait(ctx context.Context) (uint64, error) {
	select {
	case <-r.e.Server.ReadyNotify():
		return uint64(r.e.Server.MemberID()), nil
	case err := <-r.e.Err():
		return 0, fmt.Errorf("failed: %w", err)
	case <-r.e.Server.StopNotify():
		return 0, ErrMemberStopped
	case <-ctx.Done():
		return 0, fmt.Errorf("not ready: %w", ctx.Err())
	}
}

func (r embedded) leader() uint64 { return uint64(r.e.Server.Leader()) }
func (r embedded) halt()          { r.e.Server.HardStop() }
func (r embedded) close()         { r.e.Close() }
func (r embedded) stop()          { r.e.Close() }

// launch starts a run of member m and records it. It returns once the
// member serves its peers (embed.StartEtcd returns then too), without
// waiting for it to be ready: members launched one after another then find
// each earlier one answering, and none waits for etcd's bootstrap timeout.
func (c *Cluster) launch(ctx context.Context, m *member) (run, error) {
	lg := c.cfg.Logger.Named(m.spec.Name)
	var r run
	if c.cfg.Processes {
		cmd := c.command
		c.mu.Lock()
		if m.command != nil {
			cmd = m.command
		}
		c.mu.Unlock()
		p, err := startProcess(cmd, m.spec, lg, func(p *process) { c.exited(m, p) })
		if err != nil {
			return nil, fmt.Errorf("cluster: start member %s: %w", m.spec.Name, err)
		}
		r = p
	} else {
		e, err := embed.StartEtcd(m.spec.EmbedConfig(lg))
		if err != nil {
			return nil, fmt.Errorf("cluster: start member %s: %w", m.spec.Name, err)
		}
		r = embedded{e}
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		m.run, m.state = r, MemberStarting
	}
	c.mu.Unlock()
	if closed {
		r.halt()
		r.close()
		return nil, ErrClosed
	}
	if p, ok := r.(*process); ok {
		if err := p.waitStarted(ctx); err != nil {
			c.abandon(m, r)
			return nil, fmt.Errorf("cluster: member %s: %w", m.spec.Name, err)
		}
	}
	return r, nil
}

// abandon ends run r of member m after a failed start, unless Close already
// took it.
func (c *Cluster) abandon(m *member, r run) {
	c.mu.Lock()
	mine := m.run == r
	if mine {
		m.run, m.state = nil, MemberStopped
	}
	c.mu.Unlock()
	if mine {
		r.halt()
		r.close()
	}
}

// ready waits until run r of member m serves requests and records it. If r
// fails first, ready ends it (unless Close already took it).
func (c *Cluster) ready(ctx context.Context, m *member, r run) error {
	id, err := r.wait(ctx)
	if err != nil {
		c.abandon(m, r)
		return fmt.Errorf("cluster: member %s: %w", m.spec.Name, err)
	}
	c.mu.Lock()
	mine := m.run == r
	if mine {
		m.id, m.state = id, MemberRunning
	}
	c.mu.Unlock()
	if !mine {
		return fmt.Errorf("cluster: member %s: %w", m.spec.Name, ErrMemberStopped)
	}
	return nil
}

// exited records that process p of member m ended on its own.
func (c *Cluster) exited(m *member, p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.run == p {
		m.run, m.state = nil, MemberStopped
	}
}

func (c *Cluster) checkIndex(i int) error {
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("%w: member %d of %d", ErrNoMember, i, len(c.members))
	}
	return nil
}

// lockMember locks c.mu and returns member i, or unlocks and returns
// ErrClosed or ErrNoMember.
func (c *Cluster) lockMember(i int) (*member, error) {
	if err := c.checkIndex(i); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	return c.members[i], nil
}

// lockProcess is lockMember for an operation that needs a process member.
func (c *Cluster) lockProcess(i int) (*member, error) {
	if err := c.checkIndex(i); err != nil {
		return nil, err
	}
	if !c.cfg.Processes {
		return nil, fmt.Errorf("%w: member %d (start the cluster with Config.Processes)", ErrNotProcess, i)
	}
	return c.lockMember(i)
}

// stateError returns the error for an operation op on member m that it
// cannot take in its state.
func stateError(op string, m *member) error {
	var err error
	switch m.state {
	case MemberStopped, MemberStarting:
		err = ErrMemberStopped
	case MemberRunning:
		err = ErrMemberRunning
	case MemberFrozen:
		err = ErrMemberFrozen
	}
	return fmt.Errorf("%w: %s member %s (%s)", err, op, m.spec.Name, m.state)
}

// State returns member i's state.
func (c *Cluster) State(i int) (MemberState, error) {
	if err := c.checkIndex(i); err != nil {
		return MemberStopped, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].state, nil
}

// Running reports whether member i serves requests: it is started, not
// stopped and not frozen.
func (c *Cluster) Running(i int) bool {
	s, err := c.State(i)
	return err == nil && s == MemberRunning
}

// PID returns the process ID of process member i, running or frozen.
func (c *Cluster) PID(i int) (int, error) {
	m, err := c.lockProcess(i)
	if err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	if m.run == nil {
		return 0, stateError("pid of", m)
	}
	return m.run.(*process).Pid(), nil
}

// StopMember stops member i gracefully; its data stays for RestartMember.
//
// A graceful stop is no failure: a leader first transfers its leadership to
// another member (etcd's Close does), so the cluster never goes without a
// leader and nothing about leader failure is tested. Use KillMember or
// FreezeMember on a process member for that.
func (c *Cluster) StopMember(i int) error {
	m, err := c.lockMember(i)
	if err != nil {
		return err
	}
	if m.state != MemberRunning {
		c.mu.Unlock()
		return stateError("stop", m)
	}
	r := m.run
	m.run, m.state = nil, MemberStopped
	c.mu.Unlock()
	r.stop()
	return nil
}

// RestartMember starts stopped (or killed) member i again from its data
// directory, on the same ports, and waits until it serves requests.
func (c *Cluster) RestartMember(ctx context.Context, i int) error {
	m, err := c.lockMember(i)
	if err != nil {
		return err
	}
	state := m.state
	c.mu.Unlock()
	if state != MemberStopped {
		return stateError("restart", m)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	r, err := c.launch(ctx, m)
	if err != nil {
		return err
	}
	return c.ready(ctx, m, r)
}

// StopLeader stops the member that leads the cluster gracefully and returns
// its index. Leadership moves to another member before it stops (see
// StopMember); use KillLeader or FreezeLeader to fail the leader.
func (c *Cluster) StopLeader(ctx context.Context) (int, error) {
	i, err := c.WaitLeader(ctx)
	if err != nil {
		return -1, err
	}
	return i, c.StopMember(i)
}

// FreezeMember stops process member i with SIGSTOP. It keeps its sockets
// and its state but answers nothing: its peers see it go silent, with no
// leadership transfer, and elect a new leader after the election timeout
// if it led. A frozen member is not running (Running, Leader).
//
// A frozen leader thawed after more than a lease TTL may, as it resumes,
// revoke the leases it believes expired while it was frozen (seen with
// etcd v3.7.3 by go run ./sim chaos): a leader pause longer than the TTL
// can end every session, which a crash of the leader never does.
func (c *Cluster) FreezeMember(i int) error {
	m, err := c.lockProcess(i)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if m.state != MemberRunning {
		return stateError("freeze", m)
	}
	if err := m.run.(*process).Signal(sigStop); err != nil {
		return fmt.Errorf("%w: freeze member %s: %v", ErrMemberStopped, m.spec.Name, err)
	}
	m.state = MemberFrozen
	return nil
}

// ThawMember resumes frozen process member i with SIGCONT. It catches up
// with the cluster on its own; a member that led finds out it no longer
// does (Leader reports disagreement until then).
func (c *Cluster) ThawMember(i int) error {
	m, err := c.lockProcess(i)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if m.state != MemberFrozen {
		if m.state == MemberRunning {
			return fmt.Errorf("%w: thaw member %s (running)", ErrMemberNotFrozen, m.spec.Name)
		}
		return stateError("thaw", m)
	}
	if err := m.run.(*process).Signal(sigCont); err != nil {
		return fmt.Errorf("%w: thaw member %s: %v", ErrMemberStopped, m.spec.Name, err)
	}
	m.state = MemberRunning
	return nil
}

// KillMember kills process member i, running or frozen, with SIGKILL and
// returns once the process is gone. Nothing is flushed or handed over; its
// data directory stays for RestartMember.
func (c *Cluster) KillMember(i int) error {
	m, err := c.lockProcess(i)
	if err != nil {
		return err
	}
	if m.state != MemberRunning && m.state != MemberFrozen {
		c.mu.Unlock()
		return stateError("kill", m)
	}
	r := m.run
	m.run, m.state = nil, MemberStopped
	c.mu.Unlock()
	r.halt()
	r.close()
	return nil
}

// FreezeLeader waits for a leader, freezes it (FreezeMember) and returns
// its index.
func (c *Cluster) FreezeLeader(ctx context.Context) (int, error) {
	return c.failLeader(ctx, c.FreezeMember)
}

// KillLeader waits for a leader, kills it (KillMember) and returns its
// index.
func (c *Cluster) KillLeader(ctx context.Context) (int, error) {
	return c.failLeader(ctx, c.KillMember)
}

func (c *Cluster) failLeader(ctx context.Context, fail func(int) error) (int, error) {
	if !c.cfg.Processes {
		return -1, fmt.Errorf("%w: start the cluster with Config.Processes", ErrNotProcess)
	}
	i, err := c.WaitLeader(ctx)
	if err != nil {
		return -1, err
	}
	return i, fail(i)
}

// stopGrace bounds how long a graceful stop of a process member may take
// before it is killed.
const stopGrace = 30 * time.Second
