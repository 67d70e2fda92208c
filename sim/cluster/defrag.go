package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defragment defragments every running member through cli (etcdctl
// defrag --endpoints=<member>), one at a time, in the order the README's
// operating section gives: each follower, then the leader once its
// leadership has moved to the first follower defragmented (MoveLeader,
// etcdctl move-leader). A member that defragments applies nothing until
// its copy is done, and the leader answers every lease renewal: a leader
// defragmented where it leads would hold every session's renewals for as
// long as its copy takes.
//
// step, if not nil, runs each step with its name ("defrag m1
// (follower)", "move leader m0 -> m1", "defrag m0 (former leader)"), so
// that the caller can watch it; Defragment returns the first error a step
// returns.
func (c *Cluster) Defragment(ctx context.Context, cli *clientv3.Client, step func(name string, do func() error) error) error {
	if step == nil {
		step = func(_ string, do func() error) error { return do() }
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	eps := c.Endpoints()
	defrag := func(i int) func() error {
		return func() error {
			if _, err := cli.Defragment(ctx, eps[i]); err != nil {
				return fmt.Errorf("cluster: defragment member %d (%s): %w", i, eps[i], err)
			}
			return nil
		}
	}
	first := -1
	for i := range eps {
		if i == leader || !c.Running(i) {
			continue
		}
		if first < 0 {
			first = i
		}
		if err := step(fmt.Sprintf("defrag m%d (follower)", i), defrag(i)); err != nil {
			return err
		}
	}
	if first < 0 { // a cluster of one: no other member can lead
		return step(fmt.Sprintf("defrag m%d (the only member)", leader), defrag(leader))
	}
	if err := step(fmt.Sprintf("move leader m%d -> m%d", leader, first), func() error { return c.MoveLeader(ctx, first) }); err != nil {
		return err
	}
	return step(fmt.Sprintf("defrag m%d (former leader)", leader), defrag(leader))
}
