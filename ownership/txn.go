package ownership

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// outcome is the result of one conditional operation of a batch: whether its
// condition held, and else the claim key as it was and (a claim's) the
// highest revision among the shape keys it compared (see claimTxn).
type outcome struct {
	ok   bool
	kv   *mvccpb.KeyValue
	seen int64
}

// claimWrite is what a claim transaction wrote: the lease and the
// acquire time recorded in each claim's value.
type claimWrite struct {
	lease clientv3.LeaseID
	since time.Time
	shape *fleetview.Shape // the fleet's shape the claims are made in
}

// chunks splits ps into batches that fit one transaction: n nested
// transactions of one comparison and one operation each need n <= limit
// at the outer level and 1 <= limit - n inside.
func chunks(ps []int, size int) [][]int {
	var out [][]int
	for len(ps) > size {
		out = append(out, ps[:size:size])
		ps = ps[size:]
	}
	if len(ps) > 0 {
		out = append(out, ps)
	}
	return out
}

// claimTxn creates the claims of ps that do not exist, bound to w.lease, in
// one transaction: one nested If(CreateRevision(claim) == 0) Then(Put) Else(Get)
// per partition, so that one existing claim does not fail the others. Each
// claim's value is keys.EncodeClaim(node, w.since). The epoch of every
// claim created is the returned revision.
//
// Each claim also compares the fleet's shape the node knows (w.shape):
// the spec's ModRevision, so that a node that has not seen the spec's last
// change (a resize started, ended or aborted) claims nothing, and during a
// resize the state of the partition's group: its done key absent for a
// source partition, present for a target. A claim whose shape is stale
// fails like one whose partition is taken.
func (n *Node) claimTxn(ctx context.Context, w claimWrite, ps []int) (int64, []outcome, error) {
	val := keys.EncodeClaim(n.id, w.since)
	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		k := n.layout.Claim(p)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}
		orElse := []clientv3.Op{clientv3.OpGet(k)}
		if s := w.shape; s != nil && s.SpecRev != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(n.layout.Spec()), "=", s.SpecRev))
			orElse = append(orElse, clientv3.OpGet(n.layout.Spec(), clientv3.WithKeysOnly()))
			if s.Resize != nil {
				id, g := s.Resize.ID, s.Group(p)
				done := n.layout.ResizeDone(id, g)
				if s.Target(p) {
					cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(done), ">", 0))
				} else {
					cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(done), "=", 0))
				}
				orElse = append(orElse, clientv3.OpGet(done, clientv3.WithKeysOnly()),
					clientv3.OpGet(n.layout.ResizeBack(id, g), clientv3.WithKeysOnly()))
			}
		}
		ops[i] = clientv3.OpTxn(cmps, []clientv3.Op{clientv3.OpPut(k, val, clientv3.WithLease(w.lease))}, orElse)
	}
	return n.batchTxn(ctx, ops)
}

// successor is the next owner a claim is handed over to (handover.go):
// its ID and the lease its member key is bound to, as this node knows
// them. The zero successor hands over nothing: the claim is deleted.
type successor struct {
	id       string
	lease    clientv3.LeaseID
	prepares bool // it prepares the partitions planned moves give it: it may have a readiness key
}

// deleteTxn ends this node's claims of ps whose epochs are still
// epochs[i], in one transaction that also makes the put put (the node's
// handoff key, nospace.go), so that etcd refuses it whenever it refuses
// puts. A claim whose to[i] names a successor is handed over to it: put,
// valued keys.EncodeClaim(successor, since) and bound to the successor's
// lease, if the successor's member key is still bound to that lease and
// the spec still at specRev (0: not compared); its epoch is then the
// transaction's revision, and the readiness key of a successor that
// prepares (warm.go) is deleted with it, which spares the successor a
// write of its own. Every other claim is deleted.
func (n *Node) deleteTxn(ctx context.Context, ps []int, epochs []int64, to []successor, specRev int64, since time.Time, put clientv3.Op) (int64, []outcome, error) {
	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		k := n.layout.Claim(p)
		cmps := []clientv3.Cmp{keys.ClaimAt(k, epochs[i])}
		then := []clientv3.Op{clientv3.OpDelete(k)}
		if s := to[i]; s.id != "" {
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(n.layout.Member(s.id)), "=", int64(s.lease)))
			if specRev != 0 {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(n.layout.Spec()), "=", specRev))
			}
			then = []clientv3.Op{clientv3.OpPut(k, keys.EncodeClaim(s.id, since), clientv3.WithLease(s.lease))}
			if s.prepares {
				then = append(then, clientv3.OpDelete(n.layout.Ready(p, s.id)))
			}
		}
		ops[i] = clientv3.OpTxn(cmps, then, []clientv3.Op{clientv3.OpGet(k)})
	}
	return n.batchTxn(ctx, ops, put)
}

// batchTxn commits the nested transactions ops, then the operations
// extra, in one transaction and returns its revision and each nested
// transaction's outcome.
func (n *Node) batchTxn(ctx context.Context, ops []clientv3.Op, extra ...clientv3.Op) (int64, []outcome, error) {
	resp, err := n.cli.Txn(ctx).Then(append(ops[:len(ops):len(ops)], extra...)...).Commit()
	if err != nil {
		return 0, nil, err
	}
	if len(resp.Responses) != len(ops)+len(extra) {
		return 0, nil, fmt.Errorf("ownership: transaction returned %d responses for %d operations", len(resp.Responses), len(ops)+len(extra))
	}
	out := make([]outcome, len(ops))
	for i, r := range resp.Responses[:len(ops)] {
		tr := r.GetResponseTxn()
		if tr == nil {
			return 0, nil, fmt.Errorf("ownership: transaction response %d is not a transaction", i)
		}
		out[i].ok = tr.Succeeded
		if tr.Succeeded {
			continue
		}
		for j, r := range tr.Responses {
			rr := r.GetResponseRange()
			if rr == nil || len(rr.Kvs) == 0 {
				continue
			}
			if j == 0 {
				out[i].kv = rr.Kvs[0]
			} else {
				out[i].seen = max(out[i].seen, rr.Kvs[0].ModRevision)
			}
		}
	}
	return resp.Header.Revision, out, nil
}

// registerTxn creates this node's member key, bound to lease, unless it
// exists. If prev is not zero, a key bound to prev (the lease of this
// node's previous generation, which only this process holds) is taken over
// in the same transaction: bound to lease, with val, keeping its
// CreateRevision, so that the fleet never sees the member leave. It
// returns the key's CreateRevision, or a *DuplicateMemberError naming the
// lease of the process that holds the ID.
func (n *Node) registerTxn(ctx context.Context, lease, prev clientv3.LeaseID, val string) (int64, error) {
	mk := n.layout.Member(n.id)
	put := clientv3.OpPut(mk, val, clientv3.WithLease(lease))
	orElse := []clientv3.Op{clientv3.OpGet(mk)}
	if prev != 0 {
		orElse = []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(mk), "=", prev)},
			[]clientv3.Op{put, clientv3.OpGet(mk)},
			[]clientv3.Op{clientv3.OpGet(mk)})}
	}
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mk), "=", 0)).
		Then(put).
		Else(orElse...).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("ownership: register member %q: %w", n.id, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	rs := resp.Responses
	if prev != 0 && len(rs) > 0 {
		if tr := rs[0].GetResponseTxn(); tr != nil {
			rs = tr.Responses
			if tr.Succeeded && len(rs) == 2 {
				if rr := rs[1].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
					return rr.Kvs[0].CreateRevision, nil
				}
				return 0, fmt.Errorf("ownership: register member %q: the key taken over is missing from the response", n.id)
			}
		}
	}
	var holder int64
	if len(rs) > 0 {
		if rr := rs[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			holder = rr.Kvs[0].Lease
		}
	}
	return 0, &DuplicateMemberError{ID: n.id, Lease: holder}
}

// unregisterTxn deletes this node's member key if it is still the one
// created at rev, in a transaction that also makes the puts (a node that
// holds claims passes its handoff key, nospace.go), so that etcd refuses
// the deletion whenever it refuses puts.
func (n *Node) unregisterTxn(ctx context.Context, rev int64, puts ...clientv3.Op) error {
	mk := n.layout.Member(n.id)
	_, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mk), "=", rev)).
		Then(append([]clientv3.Op{clientv3.OpDelete(mk)}, puts...)...).
		Else(puts...).
		Commit()
	return err
}
