package etcderr

import (
	"context"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Alarm is an alarm that stands in etcd: its name (NOSPACE, CORRUPT) and
// the ID of the member that raised it, in hexadecimal as etcdctl prints
// it.
type Alarm struct {
	Alarm  string
	Member string
}

// Alarms lists the alarms that stand in etcd (etcdctl alarm list) through
// c, if c can list them: a clientv3.Maintenance, as a *clientv3.Client is.
// listed is false if it cannot. etcd answers the list through raft: each
// call is one proposal, so callers list once per pass or command, never
// per request. The list is never nil when listed.
func Alarms(ctx context.Context, c any) (alarms []Alarm, listed bool, err error) {
	m, ok := c.(clientv3.Maintenance)
	if !ok {
		return nil, false, nil
	}
	resp, err := m.AlarmList(ctx)
	if err != nil {
		return nil, true, err
	}
	alarms = make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		alarms = append(alarms, Alarm{Alarm: a.Alarm.String(), Member: strconv.FormatUint(a.MemberID, 16)})
	}
	return alarms, true, nil
}
