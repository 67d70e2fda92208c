package simulation

import (
	"context"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// handovers watches, while the workload runs, through memetcd's transaction hook, every hand-over
// of a claim in a tenure run: a nested transaction that compares the
// lease of a member key and puts a claim (ownership's deleteTxn), handed
// over if etcd applied it, refused otherwise (the holder then deletes the
// claim). It also runs the schedule's KillSuccessor faults: armed at
// their time, each fires on the next hand-over to a live node, in the
// holder's transaction's own request, either just before etcd applies it
// (the successor's process stops and its lease is revoked, so that etcd
// refuses the hand-over) or just after etcd committed it, before the
// successor, which learns of the claim by its watch, can have served it.
type handovers struct {
	w      *world
	admin  *memetcd.Client
	layout keys.Layout

	attempts, handed, refused atomic.Int64

	mu       sync.Mutex
	closed   bool
	pauses   sync.WaitGroup // paused successors waiting to resume
	armed    []Fault
	acquired map[tenureOf]bool
	// killsBefore counts successors killed just before the hand-over's
	// transaction, refusedKills those whose hand-over etcd then refused;
	// killsAfter those killed once it committed, servedKills those of
	// them that had served the partition already (the window missed).
	killsBefore, refusedKills, killsAfter, servedKills int
}

// tenureOf names one node's tenure of a partition scope at an epoch.
type tenureOf struct {
	node, scope string
	epoch       int64
}

// handing is one hand-over in a transaction: the index of its nested
// transaction, the partition and the successor with its lease.
type handing struct {
	idx   int
	p     int
	to    string
	lease int64
}

func newHandovers(w *world, admin *memetcd.Client) *handovers {
	h := &handovers{w: w, admin: admin, layout: keys.New(cluster), acquired: map[tenureOf]bool{}}
	w.srv.OnTxn(h.onTxn)
	w.successorKill = h.arm
	return h
}

// arm queues a KillSuccessor fault for the next hand-over.
func (h *handovers) arm(f Fault) {
	h.mu.Lock()
	h.armed = append(h.armed, f)
	h.mu.Unlock()
}

// served notes that node acquired scope at epoch (its OnAcquired).
func (h *handovers) served(node, scope string, epoch int64) {
	h.mu.Lock()
	h.acquired[tenureOf{node, scope, epoch}] = true
	h.mu.Unlock()
}

// parse returns the hand-overs of req.
func (h *handovers) parse(req *pb.TxnRequest) []handing {
	var out []handing
	for i, op := range req.Success {
		rt := op.GetRequestTxn()
		if rt == nil {
			continue
		}
		var to string
		var lease int64
		for _, c := range rt.Compare {
			if id, ok := h.layout.MemberID(string(c.Key)); ok && c.Target == pb.Compare_LEASE {
				to, lease = id, c.GetLease()
			}
		}
		if to == "" {
			continue
		}
		for _, op := range rt.Success {
			if put := op.GetRequestPut(); put != nil {
				if p, ok := h.layout.ClaimPartition(string(put.Key)); ok {
					out = append(out, handing{idx: i, p: p, to: to, lease: lease})
				}
			}
		}
	}
	return out
}

// take pops the first armed fault if one of hs hands over to a live node,
// and returns it with that hand-over.
func (h *handovers) take(hs []handing) (Fault, handing, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.armed) == 0 || h.w.ctx.Err() != nil {
		return Fault{}, handing{}, false
	}
	for _, x := range hs {
		if sn := h.w.nodeByID(x.to); sn != nil && !sn.crashed.Load() {
			f := h.armed[0]
			h.armed = h.armed[1:]
			return f, x, true
		}
	}
	return Fault{}, handing{}, false
}

func (h *handovers) onTxn(_ memetcd.ClientID, req *pb.TxnRequest) func(*pb.TxnResponse, error) {
	hs := h.parse(req)
	if len(hs) == 0 || h.w.ctx.Err() != nil {
		return nil
	}
	f, target, fire := h.take(hs)
	if fire && f.Before {
		h.kill(target, f, true)
	}
	return func(resp *pb.TxnResponse, err error) {
		if err != nil || resp == nil {
			return
		}
		for _, x := range hs {
			h.attempts.Add(1)
			ok := x.idx < len(resp.Responses) && resp.Responses[x.idx].GetResponseTxn().GetSucceeded()
			if ok {
				h.handed.Add(1)
			} else {
				h.refused.Add(1)
			}
			if !fire || x != target {
				continue
			}
			h.mu.Lock()
			switch {
			case f.Before:
				if !ok {
					h.refusedKills++
				}
			case ok:
				h.killsAfter++
				if h.acquired[tenureOf{x.to, fence.PartitionScope(x.p), resp.Header.GetRevision()}] {
					h.servedKills++
				}
			default:
				// Refused for another reason (the spec changed): the
				// fault waits for the next hand-over.
				h.armed = append([]Fault{f}, h.armed...)
			}
			h.mu.Unlock()
			if ok && !f.Before {
				h.kill(x, f, false)
			}
		}
	}
}

// kill stops the process of x's successor: for good (f.Dur 0, as a
// Crash) or paused for f.Dur (its etcd client cut off); before the
// hand-over's transaction its lease also ends, revoked, as a lease whose
// last renewal the stop cut off would have expired.
func (h *handovers) kill(x handing, f Fault, revoke bool) {
	w := h.w
	sn := w.nodeByID(x.to)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	if f.Dur == 0 {
		sn.crashed.Store(true)
		sn.cut()
		w.healed(w.now())
	} else {
		sn.cut()
		h.pauses.Go(func() {
			clock.Sleep(w.end, w.fc, f.Dur)
			sn.uncut()
			w.healed(w.now())
		})
	}
	if revoke {
		h.killsBefore++
	}
	h.mu.Unlock()
	if revoke {
		ctx, cancel := clock.WithTimeout(context.Background(), w.fc, w.cfg.TTL)
		_, _ = h.admin.Revoke(ctx, clientv3.LeaseID(x.lease))
		cancel()
	}
}

// close removes the hook and waits for the paused successors, which
// resume when the run ends.
func (h *handovers) close() {
	h.w.srv.OnTxn(nil)
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.pauses.Wait()
}
