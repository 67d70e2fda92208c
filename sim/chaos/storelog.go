//go:build unix

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/chaos/internal/wire"
	"github.com/tenure-go/tenure/sim/check"
)

// readStoreLog reads etcd's log of every key from revision after+1 to
// the current revision: the store's own order of every floor raised and
// every counter written, whoever wrote it and whatever its writer learned.
func readStoreLog(ctx context.Context, cli *clientv3.Client, after int64) ([]*clientv3.Event, error) {
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		return nil, fmt.Errorf("chaos: read revision: %w", err)
	}
	last := resp.Header.Revision
	if last <= after {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []*clientv3.Event
	for wr := range cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(after+1)) {
		if err := wr.Err(); err != nil {
			return nil, fmt.Errorf("chaos: read etcd's log: %w", err)
		}
		out = append(out, wr.Events...)
		if n := len(out); n > 0 && out[n-1].Kv.ModRevision >= last {
			return out, nil
		}
	}
	return nil, fmt.Errorf("chaos: read etcd's log: %w", ctx.Err())
}

// recordStore records etcd's log into the fleet's recorder, in etcd's
// order, and the final counters, and returns what does not add up: writes
// in etcd that no worker announced, acknowledged writes missing from etcd,
// counters deleted.
func recordStore(f *fleet, log []*clientv3.Event, finals map[string][]byte) (anomalies []string, unknownApplied int) {
	h := f.rec.History()
	byID := make(map[check.WriteID]check.Write, len(h.Writes))
	for _, w := range h.Writes {
		byID[w.ID] = w
	}
	fencePrefix := keys.New(clusterName).Fences()
	counterPrefix := dataPrefix() + wire.CounterKey("")
	seen := make(map[check.WriteID]bool)
	applied := make(map[string]string) // key and increment ID -> the write that applied it
	var at time.Duration
	for _, ev := range log {
		key := string(ev.Kv.Key)
		switch {
		case strings.HasPrefix(key, fencePrefix):
			if ev.Type != mvccpb.PUT {
				anomalies = append(anomalies, fmt.Sprintf("fence floor %s deleted at revision %d", key, ev.Kv.ModRevision))
				continue
			}
			epoch, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
			if err != nil {
				anomalies = append(anomalies, fmt.Sprintf("fence floor %s holds %q", key, ev.Kv.Value))
				continue
			}
			f.rec.RaiseFloor(key[len(fencePrefix):], epoch, at)
		case strings.HasPrefix(key, counterPrefix):
			if ev.Type != mvccpb.PUT {
				anomalies = append(anomalies, fmt.Sprintf("counter %s deleted at revision %d", key, ev.Kv.ModRevision))
				continue
			}
			c, err := wire.DecodeCounter(ev.Kv.Value)
			if err != nil {
				anomalies = append(anomalies, err.Error())
				continue
			}
			if n := len(c.IDs); n > 0 {
				// The increment this write applied is the last ID it
				// recorded: no ID may be applied twice.
				k := key + " " + c.IDs[n-1]
				if prev, dup := applied[k]; dup {
					anomalies = append(anomalies, fmt.Sprintf("increment %s of %s applied twice: by write %s, then by write %s at revision %d",
						c.IDs[n-1], key[len(counterPrefix):], prev, c.W, ev.Kv.ModRevision))
				}
				applied[k] = c.W
			}
			f.mu.Lock()
			id, ok := f.writes[c.W]
			f.mu.Unlock()
			if !ok {
				anomalies = append(anomalies, fmt.Sprintf("counter %s written at revision %d by write %s, which no worker announced", key, ev.Kv.ModRevision, c.W))
				continue
			}
			w := byID[id]
			t := w.Invoke
			if w.Outcome == check.Accepted {
				t = w.Return
			}
			at = max(at, t)
			seen[id] = true
			if w.Outcome == check.Unknown {
				unknownApplied++
			}
			f.rec.Applied(id, at)
		}
	}
	for _, w := range h.Writes {
		if w.Outcome == check.Accepted && !seen[w.ID] {
			anomalies = append(anomalies, fmt.Sprintf("acknowledged %v is not in etcd's log", w))
		}
	}
	for k, v := range finals {
		if !strings.HasPrefix(k, wire.CounterKey("")) {
			continue
		}
		c, err := wire.DecodeCounter(v)
		if err != nil {
			anomalies = append(anomalies, err.Error())
			continue
		}
		f.rec.SetFinal(k, string(v))
		f.rec.SetFinal(strings.TrimPrefix(k, wire.CounterKey("")), strconv.FormatInt(c.N, 10))
	}
	return anomalies, unknownApplied
}
