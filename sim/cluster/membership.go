package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReplaceMember replaces member i with a new etcd member, the way an
// operator replaces a machine with etcdctl: it removes the member from the
// cluster through the client API (MemberRemove, etcdctl member remove),
// ends its run, adds a new member through the client API (MemberAdd,
// etcdctl member add) and starts it with an empty data directory and
// etcd's --initial-cluster-state existing, then waits until it serves
// requests. It returns the new member's etcd ID.
//
// If member i leads the cluster, ReplaceMember first hands its leadership
// to another member (MoveLeader, etcdctl move-leader), as an operator
// should: etcd does not move leadership when it removes the leader, so the
// others would wait out an election timeout with no leader, in which no
// request or lease renewal can commit.
//
// The new member takes index i, a new name (m<i>r<n> for the nth
// replacement), a new data directory, and member i's ports, as a
// replacement machine that takes over the old one's address does: clients
// and FaultPoints keep reaching index i. Member i may be running or
// stopped, not frozen; the other members must hold a quorum without it.
// etcd refuses the removal and the addition until the members have been
// connected to each other for 5s (its health interval); ReplaceMember asks
// again until they have, bounded by ctx and Config.StartTimeout.
func (c *Cluster) ReplaceMember(ctx context.Context, i int) (uint64, error) {
	m, err := c.lockMember(i)
	if err != nil {
		return 0, err
	}
	if m.state == MemberFrozen || m.state == MemberStarting {
		c.mu.Unlock()
		return 0, stateError("replace", m)
	}
	old, spec := m.id, m.spec
	c.mu.Unlock()
	if old == 0 {
		return 0, fmt.Errorf("%w: replace member %s: it never served, its ID is unknown", ErrMemberStopped, spec.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if lead, err := c.Leader(); err == nil && lead == i {
		if err := c.MoveLeader(ctx, c.otherRunning(i)); err != nil {
			return 0, fmt.Errorf("cluster: replace member %s: %w", spec.Name, err)
		}
	}
	cli, err := clientv3.New(ClientConfig(c.othersEndpoints(i)))
	if err != nil {
		return 0, fmt.Errorf("cluster: replace member %s: client: %w", spec.Name, err)
	}
	defer cli.Close()
	if err := c.whenHealthy(ctx, func() error {
		_, err := cli.MemberRemove(ctx, old)
		return err
	}); err != nil {
		return 0, fmt.Errorf("cluster: replace member %s: member remove %x: %w", spec.Name, old, err)
	}
	// A removed member stops on its own once it learns it was removed;
	// end its run here in case it has not yet.
	c.mu.Lock()
	r := m.run
	m.run, m.state = nil, MemberStopped
	c.mu.Unlock()
	if r != nil {
		r.halt()
		r.close()
	}
	// A removed leader leaves the others without one until they elect
	// another, and a follower drops a proposal while it knows no leader:
	// a MemberAdd sent then waits for etcd's request timeout.
	if _, err := c.WaitLeader(ctx); err != nil {
		return 0, fmt.Errorf("cluster: replace member %s: %w", spec.Name, err)
	}
	var resp *clientv3.MemberAddResponse
	if err := c.whenHealthy(ctx, func() error {
		var err error
		resp, err = cli.MemberAdd(ctx, []string{spec.PeerURL.String()})
		return err
	}); err != nil {
		return 0, fmt.Errorf("cluster: replace member %s: member add: %w", spec.Name, err)
	}
	c.mu.Lock()
	base, _, _ := strings.Cut(spec.Name, "r")
	m.replacements++
	spec.Name = fmt.Sprintf("%sr%d", base, m.replacements)
	c.mu.Unlock()
	spec.Dir = filepath.Join(c.dir, spec.Name)
	spec.Join = true
	var initial []string
	for _, mem := range resp.Members {
		name := mem.Name
		if mem.ID == resp.Member.ID {
			name = spec.Name
		}
		for _, u := range mem.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	spec.InitialCluster = strings.Join(initial, ",")
	c.mu.Lock()
	m.spec.Name, m.spec.Dir, m.spec.Join, m.spec.InitialCluster = spec.Name, spec.Dir, spec.Join, spec.InitialCluster
	c.mu.Unlock()
	r, err = c.launch(ctx, m)
	if err != nil {
		return 0, err
	}
	if err := c.ready(ctx, m, r); err != nil {
		return 0, err
	}
	return resp.Member.ID, nil
}

// MoveLeader makes member to the cluster's leader, the way an operator
// does with etcdctl move-leader: it asks the current leader to transfer its
// leadership (etcd answers only on the leader) and waits until the running
// members follow member to. etcd refuses while member to is not caught up
// with the leader's log ("etcdserver: leader transfer timeout"); MoveLeader
// asks again every raft tick until it succeeds or ctx ends.
func (c *Cluster) MoveLeader(ctx context.Context, to int) error {
	m, err := c.lockMember(to)
	if err != nil {
		return err
	}
	id, name := m.id, m.spec.Name
	if m.state != MemberRunning {
		defer c.mu.Unlock()
		return stateError("move leader to", m)
	}
	c.mu.Unlock()
	err = c.everyTick(ctx, func() (bool, error) {
		lead, err := c.WaitLeader(ctx)
		if err != nil || lead == to {
			return true, err
		}
		// Once etcd agreed, WaitLeader sees member to lead as soon as the
		// others follow it.
		return false, c.askMoveLeader(ctx, lead, id)
	})
	if err != nil {
		return fmt.Errorf("cluster: move leader to %s: %w", name, err)
	}
	return nil
}

// otherRunning returns the index of the first running member other than
// i, or i if there is none (MoveLeader then refuses it).
func (c *Cluster) otherRunning(i int) int {
	for j := range c.members {
		if j != i && c.Running(j) {
			return j
		}
	}
	return i
}

// askMoveLeader sends MoveLeader(id) to member lead alone.
func (c *Cluster) askMoveLeader(ctx context.Context, lead int, id uint64) error {
	cli, err := clientv3.New(ClientConfig([]string{c.Endpoints()[lead]}))
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.MoveLeader(ctx, id)
	return err
}

// whenHealthy calls op until it does not fail with "etcdserver: unhealthy
// cluster", every raft tick, bounded by ctx. etcd refuses to remove a
// voting member, or to add one, unless the member that takes the request
// has been connected to enough of the others for its health interval
// (5s), which members just started, replaced or made leader have not; an
// operator runs the command again.
func (c *Cluster) whenHealthy(ctx context.Context, op func() error) error {
	return c.everyTick(ctx, func() (bool, error) {
		err := op()
		return !errors.Is(err, rpctypes.ErrUnhealthy), err
	})
}

// othersEndpoints returns the client URLs of every member but i.
func (c *Cluster) othersEndpoints(i int) []string {
	var eps []string
	for j, ep := range c.Endpoints() {
		if j != i {
			eps = append(eps, ep)
		}
	}
	return eps
}

// SetMemberBinary makes process member i run the etcdmember executable at
// path from its next start on (RestartMember, ReplaceMember), instead of
// Config.MemberBinary. An empty path means the binary built from the
// current module, on the etcd release of tenure's go.mod (built as
// Config.MemberBinary says, bounded by ctx). A rolling upgrade of etcd is
// StopMember, SetMemberBinary and RestartMember, one member at a time,
// on a cluster started on an older release (PreviousMemberBinary).
func (c *Cluster) SetMemberBinary(ctx context.Context, i int, path string) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	cfg := c.cfg
	cfg.MemberBinary = path
	cmd, err := memberCommand(ctx, cfg)
	if err != nil {
		return err
	}
	m, err := c.lockProcess(i)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	m.command = cmd
	return nil
}
