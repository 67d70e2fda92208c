package scenario

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/memetcd"
)

// watchAfterCompaction: A holds "the key" and believes it holds it until
// it sees the key deleted on its watch. While A is cut off, an operator
// deletes A's key, B takes over and writes, and etcd compacts; A's watch
// stream breaks and resumes after the compaction. Off: a naive holder that
// restarts its watch from the current revision after ErrCompacted, so it
// never sees the delete and writes as holder. On: tenure's election, whose
// Term rereads its key after a broken watch and ends. Both write to an
// unfenced store, so only the resynchronization protects.
func watchAfterCompaction(protected bool) (Outcome, error) {
	e, err := newEnv()
	if err != nil {
		return Outcome{}, err
	}
	defer e.close()
	ctx := e.ctx
	var out Outcome
	admin := e.client()

	var believes atomic.Bool
	var keyA string
	var epochA int64
	var ca *memetcd.Client
	scope := "leader/k"
	if !protected {
		ca = e.client()
		lease, err := ca.Grant(ctx, 10)
		if err != nil {
			return out, err
		}
		keyA = "/holder/k"
		resp, err := ca.Put(ctx, keyA, "A", clientv3.WithLease(lease.ID))
		if err != nil {
			return out, err
		}
		epochA = resp.Header.Revision
		believes.Store(true)
		wctx, wcancel := context.WithCancel(ctx)
		e.onClose(wcancel)
		go func() {
			rev := epochA + 1
			for wctx.Err() == nil {
				for wr := range ca.Watch(wctx, keyA, clientv3.WithRev(rev)) {
					if wr.Err() != nil {
						break
					}
					for _, ev := range wr.Events {
						if ev.Type == mvccpb.DELETE {
							believes.Store(false)
							return
						}
					}
				}
				// The naive resume: from the current revision on.
				rev = 0
				if r, err := ca.Get(wctx, "/"); err == nil {
					rev = r.Header.Revision + 1
				}
			}
		}()
	} else {
		a, err := e.candidate(ctx, "A")
		if err != nil {
			return out, err
		}
		e.onClose(a.close)
		ca = a.cli
		ta, err := a.el.Campaign(ctx)
		if err != nil {
			return out, err
		}
		keyA, epochA = ta.Key(), ta.Token().Epoch
		believes.Store(true)
		go func() {
			<-ta.Done()
			believes.Store(false)
		}()
	}
	e.rec.BeginTenure(scope, epochA, "A", e.now())
	e.sleep(100 * time.Millisecond)

	// A is cut off; the operator force-releases its key; B takes over.
	e.srv.Partition(ca.ID())
	if _, err := admin.Delete(ctx, keyA); err != nil {
		return out, err
	}
	resp, err := admin.Put(ctx, "/holder/b", "B")
	if err != nil {
		return out, err
	}
	epochB := resp.Header.Revision
	e.rec.BeginTenure(scope, epochB, "B", e.now())
	e.incrUnfenced("k", scope, epochB, "B", e.readUnfenced("k"))
	if _, err := admin.Compact(ctx, e.srv.Revision()); err != nil {
		return out, err
	}
	e.srv.DropWatches(ca.ID())
	e.sleep(300 * time.Millisecond)
	e.srv.Heal(ca.ID())
	e.sleep(time.Second)

	if believes.Load() {
		out.Notes = append(out.Notes, "A still believes it holds the key and writes")
		e.incrUnfenced("k", scope, epochA, "A", e.readUnfenced("k")-1)
	} else {
		out.Notes = append(out.Notes, "A saw its key gone after the compaction and stopped")
		e.rec.EndTenure(scope, epochA, "A", e.now())
	}
	out.Notes = append(out.Notes, fmt.Sprintf("A epoch %d, B epoch %d", epochA, epochB))
	out.Report, err = e.report(nil)
	return out, err
}
