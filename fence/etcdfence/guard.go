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

// epochWidth is the number of decimal digits of the largest int64, the
// fixed width of an encoded floor.
const epochWidth = 19

// encodeEpoch writes e (positive) as epochWidth zero-padded decimal digits,
// so that byte-wise comparison of encodings orders epochs numerically.
func encodeEpoch(e int64) string {
	var b [epochWidth]byte
	for i := epochWidth - 1; i >= 0; i-- {
		b[i] = byte('0' + e%10)
		e /= 10
	}
	return string(b[:])
}

// decodeEpoch reads a value written by encodeEpoch.
func decodeEpoch(v []byte) (int64, error) {
	if len(v) != epochWidth {
		return 0, fmt.Errorf("%w: value %q is not a %d-digit epoch", ErrCorruptFloor, v, epochWidth)
	}
	var e int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: value %q is not a %d-digit epoch", ErrCorruptFloor, v, epochWidth)
		}
		d := int64(c - '0')
		if e > (1<<63-1-d)/10 {
			return 0, fmt.Errorf("%w: value %q overflows an epoch", ErrCorruptFloor, v)
		}
		e = e*10 + d
	}
	if e == 0 {
		return 0, fmt.Errorf("%w: epoch 0 is never admitted", ErrCorruptFloor)
	}
	return e, nil
}
