package etcdfence

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
)

// ClaimGuard returns the comparison that holds iff the claim or leadership
// key claimKey still stands as the one that issued t: for a claim, its
// ModRevision equals t.Epoch (a hand-over to the next owner rewrites the
// claim and raises it); for a leadership key (t's scope a
// fence.LeaderScope), its CreateRevision does (Proclaim rewrites the key
// and keeps it). Put it in the If of your own transaction; the transaction's
// Then branch then runs only while the writer still holds its claim, however
// long it was paused before sending. To report a refusal as ClaimGuarded
// does, add clientv3.OpGet(claimKey) to the Else branch and return a
// *fence.StaleError for t whose Current is the epoch of the key it reads
// (0 if none).
//
// It returns an error wrapping fence.ErrInvalidToken for an invalid token,
// or ErrInvalidKey for an empty key.
func ClaimGuard(claimKey string, t fence.Token) (clientv3.Cmp, error) {
	if err := t.Validate(); err != nil {
		return clientv3.Cmp{}, err
	}
	if claimKey == "" {
		return clientv3.Cmp{}, fmt.Errorf("%w: empty claim key", ErrInvalidKey)
	}
	if leaderToken(t) {
		return clientv3.Compare(clientv3.CreateRevision(claimKey), "=", t.Epoch), nil
	}
	return keys.ClaimAt(claimKey, t.Epoch), nil
}

// leaderToken reports whether t is a leadership token (its scope a
// fence.LeaderScope): the leader key's epoch is its CreateRevision, which
// Proclaim keeps while it rewrites the key; a claim's is keys.ClaimEpoch.
func leaderToken(t fence.Token) bool { return strings.HasPrefix(t.Scope, fence.LeaderScope("")) }

// epochOf returns the epoch of kv, the key that issued t or its successor.
func epochOf(t fence.Token, kv *mvccpb.KeyValue) int64 {
	if leaderToken(t) {
		return kv.CreateRevision
	}
	return keys.ClaimEpoch(kv)
}

// ClaimGuarded runs ops in one transaction that lands only while the claim
// (or leadership key) claimKey still stands as the one that issued t:
//
//	If(ModRevision(claimKey) = t.Epoch) Then(ops...) Else(Get(claimKey))
//
// (CreateRevision for a leadership token).
//
// It returns the transaction's response if it landed, or a
// *fence.StaleError (errors.Is fence.ErrStale) whose Current is the epoch of
// the claim that stands now (0 if none) if it did not. Bad input gets
// ClaimGuard's errors, or ErrNilArgument for a nil kv; a failed request
// gets etcd's error, and then ops may or may not have been applied. Use
// ClaimGuard instead to put the guard in a transaction of your own.
func ClaimGuarded(ctx context.Context, kv clientv3.KV, claimKey string, t fence.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	guard, err := ClaimGuard(claimKey, t)
	if err != nil {
		return nil, err
	}
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd KV %T", ErrNilArgument, kv)
	}
	resp, err := kv.Txn(ctx).If(guard).Then(ops...).Else(clientv3.OpGet(claimKey)).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdfence: write guarded by claim %q: %w", claimKey, err)
	}
	if !resp.Succeeded {
		var cur int64 // the epoch of the claim that stands now, 0 if none
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			cur = epochOf(t, kvs[0])
		}
		return nil, &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur}
	}
	return resp, nil
}
