package cluster

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A cluster started with Config.QuotaBackendBytes raises etcd's NOSPACE
// alarm once its database reaches that size: etcd then takes reads,
// deletions and lease renewals but refuses every put. ReclaimSpace does
// what an operator does about it, through the client API as etcdctl
// does: compact, defragment every member, disarm the alarm.

// Alarms returns the alarms that stand in the cluster (etcdctl alarm
// list), through cli.
func Alarms(ctx context.Context, cli *clientv3.Client) ([]*pb.AlarmMember, error) {
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: alarm list: %w", err)
	}
	return resp.Alarms, nil
}

// ReclaimSpace frees the space of the history before the current revision
// and disarms the NOSPACE alarm, through cli, as an operator does with
// etcdctl: compact at the current revision (etcdctl compact), defragment
// every member, one at a time (etcdctl defrag --endpoints=<member>), and
// disarm every alarm that stands (etcdctl alarm disarm).
func (c *Cluster) ReclaimSpace(ctx context.Context, cli *clientv3.Client) error {
	resp, err := cli.Get(ctx, "compact-probe")
	if err != nil {
		return fmt.Errorf("cluster: read the revision: %w", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("cluster: compact at %d: %w", resp.Header.Revision, err)
	}
	for i, ep := range c.Endpoints() {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			return fmt.Errorf("cluster: defragment member %d (%s): %w", i, ep, err)
		}
	}
	alarms, err := Alarms(ctx, cli)
	if err != nil {
		return err
	}
	for _, a := range alarms {
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			return fmt.Errorf("cluster: alarm disarm %v on member %x: %w", a.Alarm, a.MemberID, err)
		}
	}
	return nil
}
