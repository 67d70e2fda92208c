package keys

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The epoch of a claim, by the one rule every reader uses: the claim key's
// ModRevision. A claim is written only when its holder changes: created
// by its owner (If(CreateRevision == 0)) or handed over by its holder to
// the next owner in one transaction (ownership's hand-over), so the
// ModRevision rises strictly with every change of holder, and a claim that
// was never handed over has ModRevision == CreateRevision. A holder never
// rewrites its own claim.

// ClaimEpoch returns the epoch of the claim key-value kv; 0 for nil.
func ClaimEpoch(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

// ClaimAt returns the comparison that holds iff the claim key key stands
// at epoch: the guard of every write made on a claim's behalf.
func ClaimAt(key string, epoch int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", epoch)
}
