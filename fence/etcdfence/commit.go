package etcdfence

import (
	"context"
	"fmt"
)

// This file drives commits: it runs the planned transactions of Commit and
// of a Batcher, and the one write of Store.Put and its kin.

// Commit applies writes, each fenced by its own token, in as few etcd
// transactions as the limits allow (Config.MaxTxnOps and MaxTxnBytes), and
// returns one Result per write, in order.
//
// A stale write is refused alone: its neighbours commit. Writes of one
// scope commit in non-decreasing epoch order, so a watcher sees a scope's
// admitted epochs never decrease, and the scope's floor rises to the
// highest epoch admitted. Writes to the same key never share a
// transaction; they commit in the order given. Transactions run one after
// another.
//
// The error is nil unless a transaction failed as a whole (etcd error,
// cancelled ctx); it is then the first such failure, and the Results of the
// writes it carried hold it too: they may or may not have been applied.
// Writes after a failed transaction are not attempted and carry the same
// error.
func (s *Store) Commit(ctx context.Context, writes []Write) ([]Result, error) {
	results := make([]Result, len(writes))
	items := make([]item, 0, len(writes))
	for i, w := range writes {
		p, err := s.prepare(w)
		if err != nil {
			results[i].Err = err
			continue
		}
		items = append(items, item{idx: i, p: p})
	}
	return results, s.commitItems(ctx, items, results, false)
}

// commitItems commits prepared items, each answered in results[item.idx].
// distinct says that no two items write the same key.
func (s *Store) commitItems(ctx context.Context, items []item, results []Result, distinct bool) error {
	var failed error
	for _, chunk := range s.plan(items, distinct) {
		if failed != nil {
			for _, it := range chunk {
				results[it.idx].Err = failed
			}
			continue
		}
		if err := s.commitChunk(ctx, chunk, results); err != nil {
			failed = err
		}
	}
	return failed
}

// item is a prepared write and its index in the caller's slice.
type item struct {
	idx int
	p   prepared
}

// maxAttempts bounds the transactions one chunk may take. Every failed
// attempt resolves a write or corrects a cached floor, so only floors that
// keep changing under the commit (deleted and recreated) can reach it.
func maxAttempts(n int) int { return 2*n + 4 }

// commitChunk commits one planned chunk and fills in its results.
//
// Writes older than the cached floor of their scope are refused at once.
// The rest go in one flat transaction that holds, per scope, one
// comparison on its floor (and per compare-and-swap one on its key's
// version): if every check holds, every write commits. If one fails, the
// floors and versions are read, the writes they refuse are answered, and
// the others go again; each failed attempt answers at least one write or
// corrects a cached floor. A lone write whose floor is not cached takes the
// single-write form, which needs no cached floor.
func (s *Store) commitChunk(ctx context.Context, chunk []item, results []Result) error {
	pending := s.rejectCached(chunk, results)
	for attempt := 0; len(pending) > 0; attempt++ {
		var err error
		switch {
		case attempt == maxAttempts(len(chunk)):
			err = fmt.Errorf("etcdfence: floors of %d writes kept changing during commit; gave up after %d transactions", len(pending), attempt)
		case len(pending) == 1 && !s.cachedPositive(pending[0].p.w.Token.Scope):
			var r Result
			if r, err = s.single(ctx, pending[0].p); err == nil {
				results[pending[0].idx] = r
				pending = nil
			}
		default:
			pending, err = s.attempt(ctx, pending, results)
		}
		if err != nil {
			for _, it := range pending {
				results[it.idx].Err = err
			}
			return err
		}
	}
	return nil
}

// single runs one write in the single-write form, which needs no cached
// floor:
//
//	If(Value(floor) > epoch) Then(Get(floor)) Else(Put(floor, epoch), write)
//
// The comparison fails on a missing floor, so the Else branch admits a
// scope never written, and records the epoch in the same transaction (a
// compare-and-swap nests its version check around both).
// Refusals come back in Result.Err; the error is reserved for etcd
// failures.
func (s *Store) single(ctx context.Context, p prepared) (Result, error) {
	resp, stale, err := s.guarded(ctx, p.w.Token, p.floor, encodeEpoch(p.w.Token.Epoch), p.singleOps()...)
	if err != nil {
		return Result{}, fmt.Errorf("etcdfence: %s %q: %w", p.w.Kind, p.w.Key, err)
	}
	if stale != nil {
		return Result{Err: stale}, nil
	}
	s.cfg.Metrics.Admitted(1)
	r := p.singleResult(resp.Header.Revision, resp.Responses)
	if r.Err == nil {
		s.cache.raise(p.w.Token.Scope, p.w.Token.Epoch)
	}
	return r, nil
}
