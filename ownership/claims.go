package ownership

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
)

// claim is the event loop's view of one partition's claim key.
type claim struct {
	owner string
	epoch int64 // CreateRevision; 0 when there is no claim
	lease clientv3.LeaseID
}

// outcome is the result of one conditional operation of a batch: whether its
// condition held, and else the claim key as it was.
type outcome struct {
	ok bool
	kv *mvccpb.KeyValue
}

// partitionOf returns the partition of a claim key, if it is one of ours.
func (l *loop) partitionOf(key []byte) (int, bool) {
	p, ok := l.n.layout.ClaimPartition(string(key))
	if !ok || p >= len(l.claims) {
		if !l.warnedKeys {
			l.warnedKeys = true
			l.n.log.Warn("ignoring claim key outside this node's partitions; do all nodes use the same partition count?",
				"key", string(key), "partitions", len(l.claims))
		}
		return 0, false
	}
	return p, true
}

// onClaim applies one event of the claims watch.
func (l *loop) onClaim(ev *clientv3.Event) {
	p, ok := l.partitionOf(ev.Kv.Key)
	if !ok {
		return
	}
	if ev.Type == clientv3.EventTypePut {
		l.applyClaim(p, ev.Kv.ModRevision, ev.Kv)
	} else {
		l.applyClaim(p, ev.Kv.ModRevision, nil)
	}
}

// applyClaim records that partition p's claim was kv (nil: absent) at
// revision rev, unless a later state of it is already known. Watch events,
// listings and transaction results all go through it, whatever order they
// arrive in.
func (l *loop) applyClaim(p int, rev int64, kv *mvccpb.KeyValue) { l.setClaim(p, rev, claimOf(kv)) }

// claimOf is the claim a claim key-value holds; nil: no claim.
func claimOf(kv *mvccpb.KeyValue) claim {
	if kv == nil {
		return claim{}
	}
	return claim{owner: string(kv.Value), epoch: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
}

// setClaim is applyClaim for a claim known by value.
func (l *loop) setClaim(p int, rev int64, c claim) {
	if rev <= l.lastRev[p] {
		return
	}
	l.lastRev[p] = rev
	old := l.claims[p]
	l.claims[p] = c
	if c != old {
		l.dirty = true
		l.checkTenure(p)
	}
}

// holds reports whether partition p's known claim is t's.
func (l *loop) holds(p int, t *tenure) bool {
	c := l.claims[p]
	return c.epoch == t.token.Epoch && c.owner == l.n.id && c.lease == l.gen.lease
}

// checkTenure ends p's tenure if its claim is gone (deleted by someone
// else, or expired with a lease).
func (l *loop) checkTenure(p int) {
	ps := &l.parts[p]
	t := ps.t
	if t == nil || l.holds(p, t) {
		return
	}
	switch ps.phase {
	case phaseFencing:
		ps.abort = true
		t.end(ReasonLost)
	case phaseFenceWait:
		t.end(ReasonLost)
		*ps = part{}
	case phaseServing:
		l.n.log.Warn("claim lost", "partition", p, "epoch", t.token.Epoch)
		t.end(ReasonLost)
		l.flushAcquired()
		l.n.fireReleased(t)
		*ps = part{}
	}
	l.dirty = true
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

// launchClaims claims the partitions ps, one transaction per batch.
func (l *loop) launchClaims(ps []int) {
	n, gen := l.n, l.gen
	for _, batch := range chunks(ps, l.batch) {
		for _, p := range batch {
			l.parts[p].phase = phaseClaiming
		}
		l.claimsInFlight++
		n.spawn(func() {
			ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
			defer cancel()
			rev, out, err := n.claimTxn(ctx, gen.lease, batch)
			n.post(gen, func(l *loop) { l.claimed(batch, rev, out, err) })
		})
	}
}

// claimTxn creates the claims of ps that do not exist, bound to lease, in
// one transaction: one nested If(CreateRevision(claim) == 0) Then(Put) Else(Get)
// per partition, so that one existing claim does not fail the others. The
// epoch of every claim created is the returned revision.
func (n *Node) claimTxn(ctx context.Context, lease clientv3.LeaseID, ps []int) (int64, []outcome, error) {
	return n.condTxn(ctx, ps, func(int) int64 { return 0 }, func(k string) clientv3.Op {
		return clientv3.OpPut(k, n.id, clientv3.WithLease(lease))
	})
}

// deleteTxn deletes the claims of ps whose epochs are still epochs[i], in
// one transaction.
func (n *Node) deleteTxn(ctx context.Context, ps []int, epochs []int64) (int64, []outcome, error) {
	return n.condTxn(ctx, ps, func(i int) int64 { return epochs[i] }, func(k string) clientv3.Op { return clientv3.OpDelete(k) })
}

// condTxn runs, for every partition ps[i], the nested transaction
// If(CreateRevision(claim) == rev(i)) Then(then(claim)) Else(Get(claim)),
// all in one transaction.
func (n *Node) condTxn(ctx context.Context, ps []int, rev func(i int) int64, then func(key string) clientv3.Op) (int64, []outcome, error) {
	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		k := n.layout.Claim(p)
		ops[i] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", rev(i))},
			[]clientv3.Op{then(k)},
			[]clientv3.Op{clientv3.OpGet(k)})
	}
	return n.batchTxn(ctx, ops)
}

// batchTxn commits the nested transactions ops in one transaction and
// returns its revision and each one's outcome.
func (n *Node) batchTxn(ctx context.Context, ops []clientv3.Op) (int64, []outcome, error) {
	resp, err := n.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, nil, err
	}
	if len(resp.Responses) != len(ops) {
		return 0, nil, fmt.Errorf("ownership: transaction returned %d responses for %d operations", len(resp.Responses), len(ops))
	}
	out := make([]outcome, len(ops))
	for i, r := range resp.Responses {
		tr := r.GetResponseTxn()
		if tr == nil {
			return 0, nil, fmt.Errorf("ownership: transaction response %d is not a transaction", i)
		}
		out[i].ok = tr.Succeeded
		if !tr.Succeeded && len(tr.Responses) > 0 {
			if rr := tr.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
				out[i].kv = rr.Kvs[0]
			}
		}
	}
	return resp.Header.Revision, out, nil
}

// claimed handles the result of a claim transaction.
func (l *loop) claimed(batch []int, rev int64, out []outcome, err error) {
	l.claimsInFlight--
	for _, p := range batch {
		l.parts[p].phase = phaseIdle
	}
	l.dirty = true
	if err != nil {
		if l.shrinkBatch(err) {
			return
		}
		l.claimAttempt++
		l.n.log.Warn("claim partitions", "error", err, "partitions", len(batch), "attempt", l.claimAttempt)
		l.holdClaims()
		return
	}
	l.claimAttempt = 0
	for i, p := range batch {
		if !out[i].ok {
			l.applyClaim(p, rev, out[i].kv)
			continue
		}
		// Unless the watch delivered a later state (the claim gone again),
		// the claim created at rev is ours.
		l.setClaim(p, rev, claim{owner: l.n.id, epoch: rev, lease: l.gen.lease})
		if l.claims[p].epoch == rev {
			l.adopt(p, rev)
		}
	}
}

// shrinkBatch halves the batch size and reports true if err says that etcd
// refused a transaction as too large and the batch can shrink.
func (l *loop) shrinkBatch(err error) bool {
	if err == nil || !etcderr.TooManyOps(err) || l.batch <= 1 {
		return false
	}
	l.batch /= 2
	l.n.log.Warn("etcd refused a transaction as too large; halving the batch", "batch", l.batch)
	return true
}

// holdClaims stops claiming until a backoff has passed.
func (l *loop) holdClaims() {
	if l.claimHold {
		return
	}
	l.claimHold = true
	l.n.after(l.gen, backoff(l.claimAttempt-1), func(l *loop) {
		l.claimHold = false
		l.dirty = true
	})
}

// startDelete queues the deletion of p's claim at epoch.
func (l *loop) startDelete(p int, epoch int64) {
	l.parts[p] = part{phase: phaseDeleting, delEpoch: epoch}
	l.pendingDeletes = append(l.pendingDeletes, p)
	l.dirty = true
}

// flushDeletes deletes the queued claims, one transaction per batch.
func (l *loop) flushDeletes() {
	if len(l.pendingDeletes) == 0 {
		return
	}
	n, gen := l.n, l.gen
	for _, batch := range chunks(l.pendingDeletes, l.batch) {
		epochs := make([]int64, len(batch))
		for i, p := range batch {
			epochs[i] = l.parts[p].delEpoch
		}
		n.spawn(func() {
			ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
			defer cancel()
			rev, out, err := n.deleteTxn(ctx, batch, epochs)
			n.post(gen, func(l *loop) { l.deleted(batch, epochs, rev, out, err) })
		})
	}
	l.pendingDeletes = nil
}

// deleted handles the result of a delete transaction.
func (l *loop) deleted(batch []int, epochs []int64, rev int64, out []outcome, err error) {
	l.dirty = true
	tooLarge := l.shrinkBatch(err)
	for i, p := range batch {
		ps := &l.parts[p]
		if ps.phase != phaseDeleting || ps.delEpoch != epochs[i] {
			continue
		}
		switch {
		case tooLarge:
			l.pendingDeletes = append(l.pendingDeletes, p)
		case err != nil:
			ps.phase = phaseDeleteWait
			ps.attempts++
			if ps.attempts == 1 {
				l.n.log.Warn("delete claim", "partition", p, "epoch", epochs[i], "error", err)
			}
			epoch := epochs[i]
			l.n.after(l.gen, backoff(ps.attempts-1), func(l *loop) {
				if ps := &l.parts[p]; ps.phase == phaseDeleteWait && ps.delEpoch == epoch {
					ps.phase = phaseDeleting
					l.pendingDeletes = append(l.pendingDeletes, p)
				}
			})
		default:
			l.applyClaim(p, rev, out[i].kv) // nil when the delete succeeded
			*ps = part{}
		}
	}
}
