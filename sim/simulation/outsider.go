package simulation

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
)

// raiseFloor runs a RaiseFloor fault as a writer outside the fleet would,
// with the admin client: it reads the partition's claim and floor, puts
// the floor key to the current revision in the store's encoding, then,
// f.Dur later, deletes the claim it read if it still stands.
//
// The Put touches the floor key and nothing else, as `etcdctl put` does;
// it is made conditional on the floor key being unchanged since the read
// only so that it can never lower a floor that a new owner raised in
// between (every epoch up to the read revision is at most that revision),
// which would let the checker count as stale a write that the floor in
// etcd admits. A raise that lost that race is not made.
func (ex *tenureEx) raiseFloor(ctx context.Context, f Fault) {
	w := ex.w
	claimKey := keys.New(cluster).Claim(f.Partition)
	floorKey := ex.fencePf + fence.PartitionScope(f.Partition)
	rctx, cancel := clock.WithTimeout(ctx, w.fc, ex.requestTimeout())
	defer cancel()
	resp, err := ex.admin.Txn(rctx).Then(clientv3.OpGet(claimKey), clientv3.OpGet(floorKey)).Commit()
	if err != nil {
		return
	}
	var claim, floor int64 // the claim's epoch and the floor key's mod revision; 0: absent
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		claim = keys.ClaimEpoch(kvs[0])
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		floor = kvs[0].ModRevision
	}
	put, err := ex.admin.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(floorKey), "=", floor)).
		Then(clientv3.OpPut(floorKey, encodeFloor(resp.Header.Revision))).
		Commit()
	if err != nil || !put.Succeeded {
		return
	}
	ex.raised.Add(1)
	if claim == 0 || !clock.Sleep(ctx, w.fc, f.Dur) {
		return
	}
	dctx, cancel := clock.WithTimeout(ctx, w.fc, ex.requestTimeout())
	defer cancel()
	_, _ = ex.admin.Txn(dctx).
		If(keys.ClaimAt(claimKey, claim)).
		Then(clientv3.OpDelete(claimKey)).
		Commit()
	w.healed(w.now())
}

// encodeFloor is an epoch as etcdfence stores a floor: 19 decimal digits,
// zero-padded.
func encodeFloor(epoch int64) string { return fmt.Sprintf("%019d", epoch) }
