package cluster

import (
	"context"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
)

// A cluster started with Config.QuotaBackendBytes raises etcd's NOSPACE
// alarm once its database reaches that size: etcd then takes reads,
// deletions and lease renewals but refuses every put. Fill brings that
// about; ReclaimSpace does what an operator does about it, through the
// client API as etcdctl does: delete what filled it, compact, defragment
// every member, disarm the alarm.

// fillPrefix is the prefix of the keys Fill writes (and ReclaimSpace
// deletes); fillValue the size of each.
const (
	fillPrefix = "/sim-cluster-fill/"
	fillValue  = 256 << 10
)

// Fill puts 256 KiB values under its own prefix, through cli, until etcd
// refuses one for its NOSPACE alarm, and returns how many it put. An
// error other than NOSPACE, or ctx's end, is returned as it is.
func Fill(ctx context.Context, cli *clientv3.Client) (int, error) {
	junk := strings.Repeat("x", fillValue)
	for i := 0; ; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("%s%d", fillPrefix, i), junk)
		switch {
		case etcderr.NoSpace(err):
			return i, nil
		case err != nil:
			return i, fmt.Errorf("cluster: fill: put %d: %w", i, err)
		}
	}
}

// Alarms returns the alarms that stand in the cluster (etcdctl alarm
// list), through cli.
func Alarms(ctx context.Context, cli *clientv3.Client) ([]*pb.AlarmMember, error) {
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: alarm list: %w", err)
	}
	return resp.Alarms, nil
}

// ReclaimSpace frees the space Fill took and disarms the NOSPACE alarm,
// through cli, as an operator does with etcdctl: delete Fill's keys
// (etcdctl del --prefix; deletions pass under the alarm), compact at the
// current revision (etcdctl compact), defragment every member, one at a
// time, the leader after its leadership has moved (Defragment), and disarm
// every alarm that stands (etcdctl alarm disarm).
func (c *Cluster) ReclaimSpace(ctx context.Context, cli *clientv3.Client) error {
	resp, err := cli.Delete(ctx, fillPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: delete %s: %w", fillPrefix, err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("cluster: compact at %d: %w", rev, err)
	}
	if err := c.Defragment(ctx, cli, nil); err != nil {
		return err
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
