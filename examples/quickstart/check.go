package main

import (
	"bytes"
	"context"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// check reads every counter and compares it with its acknowledged
// increments.
func (d *demo) check(ctx context.Context) error {
	resp, err := d.fleet.store.Get(ctx, "/quickstart/data/counters/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	counted := map[string]int64{}
	for _, kv := range resp.Kvs {
		c, err := decodeCounter(kv.Value)
		if err != nil {
			return err
		}
		counted[string(bytes.TrimPrefix(kv.Key, []byte("/quickstart/data/counters/")))] = c.count
	}
	for k := range d.cfg.Keys {
		key := "key-" + strconv.Itoa(k)
		acked := d.acked[k].Load()
		d.rep.Acked += acked
		d.rep.Counted += counted[key]
		if counted[key] != acked {
			d.rep.Mismatched++
			d.printf("MISMATCH %s: counter %d, acknowledged %d\n", key, counted[key], acked)
		}
	}
	return nil
}
