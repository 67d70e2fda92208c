package etcdfence

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// ClaimGuard returns the comparison that holds iff the claim or leadership
// key claimKey still stands as the one that issued t: its CreateRevision
// equals t.Epoch. Put it in the If of your own transaction; the transaction's
// Then branch then runs only while the writer still holds its claim, however
// long it was paused before sending. Add clientv3.OpGet(claimKey) to the Else
// branch and pass what it returns to ClaimStaleError to report a refusal.
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
	return clientv3.Compare(clientv3.CreateRevision(claimKey), "=", t.Epoch), nil
}

// ClaimStaleError returns the error for t refused by a ClaimGuard, given the
// claim key as read in the same transaction (nil if it no longer exists).
// The error's Current is the epoch of the claim that stands now: its
// CreateRevision, or 0 when no claim stands. errors.Is(err, fence.ErrStale)
// holds.
func ClaimStaleError(t fence.Token, claim *mvccpb.KeyValue) *fence.StaleError {
	var cur int64
	if claim != nil {
		cur = claim.CreateRevision
	}
	return fence.NewStaleError(t, cur)
}
