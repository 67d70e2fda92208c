package fleet

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
)

// maxVerifyReads bounds the etcd reads that Verify makes at once on
// tokens its view cannot decide, so that a flood of made-up tokens costs
// etcd at most this many reads in flight per Observer.
const maxVerifyReads = 4

// claimEpochs is what an Observer's view says of every partition's claim:
// the epoch of its current claim (0: none) and the newest epoch of any
// claim it has seen (the current one, or one since deleted).
type claimEpochs struct {
	current []int64
	highest []int64
}

// claimEpochs records the fleet's current claims in o.highest and returns
// both, for a new table. It runs where publish does.
func (o *Observer) claimEpochs() claimEpochs {
	if n := len(o.fleet.Claims); n > len(o.highest) {
		o.highest = append(o.highest, make([]int64, n-len(o.highest))...)
	}
	ce := claimEpochs{current: make([]int64, len(o.fleet.Claims)), highest: make([]int64, len(o.fleet.Claims))}
	for p, c := range o.fleet.Claims {
		ce.current[p] = c.Epoch
		o.highest[p] = max(o.highest[p], c.Epoch)
	}
	copy(ce.highest, o.highest)
	return ce
}

// Verify reports whether the fleet issued t, checked against the
// Observer's watched view of the fleet's claims, so that an
// httpfence.Handler admits only tokens of real tenures (the Observer is an
// httpfence.Verifier; sig is not consulted). For a partition's scope
// "p/<n>" with n in [0, P):
//
//   - t's epoch is the epoch (keys.ClaimEpoch) of the partition's current claim:
//     nil, without a round trip to etcd;
//   - it is older than the current claim, or, while no claim stands, at or
//     below the newest claim the view has seen (that tenure has ended): a
//     *fence.StaleError (errors.Is fence.ErrStale) naming that claim's
//     epoch;
//   - it is newer than every claim the view knows: the view may lag a
//     claim just created, so Verify reads the claim key once, linearizably,
//     and returns nil if the claim's epoch is t's epoch, a
//     *fence.StaleError if it is newer, and otherwise (an older claim, or
//     none) an error wrapping fence.ErrUnknownEpoch: no owner of the
//     partition was issued that epoch. With no claim in etcd no token is
//     admitted: a partition nobody owns has no tenure to fence for.
//
// At most maxVerifyReads such reads run at once; the others wait, bounded
// by ctx. A read that fails returns the etcd error (wrapping neither
// sentinel: the Handler answers it as unavailable, and admits nothing).
// Any other scope (a leader's "leader/<name>", whose keys the Observer
// does not follow: verify those with signatures, election.ElectionConfig.Signer
// and fence.SignatureVerifier) gives an error wrapping
// fence.ErrUnknownScope, and a closed Observer one wrapping ErrClosed.
//
// A verified token shows that the fleet issued its epoch, not that its
// tenure still lasts nor that the caller is its holder: the Fencer behind
// the Handler still decides, by its floors, and the token's epoch is one
// the scope's real owners have reached, so admitting it cannot shut a
// later owner out. Verify is safe for concurrent use and does not allocate
// when the view decides.
func (o *Observer) Verify(ctx context.Context, t fence.Token, _ fence.Signature) error {
	select {
	case <-o.done:
		return fmt.Errorf("%w: observer closed: cannot verify %s", ErrClosed, t)
	default:
	}
	p, ok := partitionOfScope(t.Scope)
	tb := o.table.Load()
	if !ok || p >= len(tb.claims.current) {
		return fmt.Errorf("%w: %q is not a partition of this fleet's %d; the fleet's claims verify partition scopes only (sign leader terms)",
			fence.ErrUnknownScope, t.Scope, len(tb.claims.current))
	}
	cur, high := tb.claims.current[p], tb.claims.highest[p]
	switch {
	case cur != 0 && t.Epoch == cur:
		return nil
	case cur != 0 && t.Epoch < cur:
		return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur}
	case cur == 0 && t.Epoch <= high:
		return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: high}
	}
	return o.verifyRead(ctx, t, p, high)
}

// verifyRead decides on t, whose epoch is newer than every claim on p that
// the view knows (high is the newest the view has seen, 0 if none), with one
// linearizable read of p's claim key.
func (o *Observer) verifyRead(ctx context.Context, t fence.Token, p int, high int64) error {
	select {
	case o.reads <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("fleet: verify %s: %w", t, context.Cause(ctx))
	}
	resp, err := o.reader.KV.Get(ctx, o.reader.Layout.Claim(p))
	<-o.reads
	if err != nil {
		return fmt.Errorf("fleet: verify %s: read the claim of partition %d: %w", t, p, err)
	}
	if len(resp.Kvs) == 1 {
		switch rev := keys.ClaimEpoch(resp.Kvs[0]); {
		case rev == t.Epoch:
			return nil
		case rev > t.Epoch:
			return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: rev}
		}
		return fmt.Errorf("%w: %s: the claim of partition %d has epoch %d", fence.ErrUnknownEpoch, t, p, keys.ClaimEpoch(resp.Kvs[0]))
	}
	return fmt.Errorf("%w: %s: partition %d has no claim (the newest the view has seen: %d)", fence.ErrUnknownEpoch, t, p, high)
}

// partitionOfScope returns n for a partition scope "p/<n>"
// (fence.PartitionScope) in canonical decimal; false for any other scope.
func partitionOfScope(scope string) (int, bool) {
	const prefix = "p/"
	if len(scope) <= len(prefix) || scope[:len(prefix)] != prefix {
		return 0, false
	}
	digits := scope[len(prefix):]
	if len(digits) > 9 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
