package election

import (
	"context"

	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/internal/watchstream"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Observation is the state of an election at a store revision.
type Observation struct {
	// Elected reports whether the election has a leader.
	Elected bool
	// Leader is the leader when Elected is true, and zero otherwise.
	Leader Leader
	// Revision is the etcd revision at which the state was observed.
	Revision int64
}

// same reports whether o and p describe the same leadership.
func (o Observation) same(p Observation) bool {
	return o.Elected == p.Elected && o.Leader == p.Leader
}

// Observe streams the election's leadership: first its current state, then
// every change of leader, of the leader's value, and every "no leader"
// state (Elected false). The channel is closed when ctx is done.
//
// A receiver that falls behind skips intermediate states but always receives
// the latest one: Observe never blocks on the receiver while following etcd.
// Observe survives etcd compaction and broken watch streams: it reads the
// election again and resumes from there. It works on any Election, including
// one without a session. Each state it sees becomes Status's Observed.
func (e *Election) Observe(ctx context.Context) <-chan Observation {
	out := make(chan Observation)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Observation) {
	defer close(out)
	var (
		last    *Observation // last delivered
		pending *Observation // to deliver
	)
	offer := func(o Observation) {
		if last != nil && last.same(o) {
			pending = nil
			return
		}
		pending = &o
		e.observe1(o)
	}
	_ = retry.Do(ctx, e.cfg.Clock, retry.Background(), func(int) (bool, error) {
		resp, err := e.kv.Get(ctx, e.prefix, clientv3.WithPrefix())
		if err != nil {
			e.log.Debug("observe: read failed", "error", err)
			return false, err
		}
		cands := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			cands[string(kv.Key)] = kv
		}
		offer(leadership(cands, resp.Header.Revision))

		wctx, cancel := context.WithCancel(ctx)
		wch := e.w.Watch(watchstream.Own(wctx), e.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		healthy := false
	follow:
		for {
			var send chan<- Observation
			var next Observation
			if pending != nil {
				send, next = out, *pending
			}
			select {
			case <-ctx.Done():
				cancel()
				return true, nil
			case send <- next:
				last, pending = &next, nil
			case wr, ok := <-wch:
				if !ok || wr.Canceled || wr.Err() != nil {
					if wr.CompactRevision != 0 {
						e.log.Debug("observe: watch compacted; reading again", "compact_revision", wr.CompactRevision)
						healthy = true // resync at once
					}
					break follow
				}
				if len(wr.Events) == 0 {
					continue
				}
				healthy = true
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						delete(cands, string(ev.Kv.Key))
					} else {
						cands[string(ev.Kv.Key)] = ev.Kv
					}
				}
				offer(leadership(cands, wr.Header.Revision))
			}
		}
		cancel()
		if healthy {
			return false, nil
		}
		return false, errWatchEnded
	})
}

// leadership returns the state given the candidates' keys.
func leadership(cands map[string]*mvccpb.KeyValue, rev int64) Observation {
	var first *mvccpb.KeyValue
	for _, kv := range cands {
		if first == nil || kv.CreateRevision < first.CreateRevision {
			first = kv
		}
	}
	if first == nil {
		return Observation{Revision: rev}
	}
	return Observation{Elected: true, Leader: leaderFromKV(first), Revision: rev}
}
