package etcdfence

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file runs one flat transaction for the writes of a planned chunk
// and sorts out which writes a refused one refuses.

// scopeGroup is the writes of one scope within an attempt.
type scopeGroup struct {
	scope, floor string
	items        []*item // by epoch
	raise        bool    // the transaction writes the floor
}

// attempt runs one flat transaction for items (distinct keys, none below
// its cached floor):
//
//	If(per scope: Value(floor) < admitBound(lowest epoch)   [or CreateRevision(floor) = 0 if known absent],
//	   per compare-and-swap: Version(key) = expected)
//	Then(the writes, by scope and epoch; Put(floor, highest epoch) where it rises)
//
// Every scope's floor is compared as etcd records it, whoever wrote it: the
// cached floor only decides which comparison to make and whether the
// floor must be written (see steadyCmp), never whether a write is
// admitted. If a check fails, a second, read-only transaction reads the
// floors and compared keys: a floor above a write's epoch refuses it
// (floors only rise, so it was stale when refused), a version other than
// expected refuses a compare-and-swap. Leaving the reads out of the first
// transaction's Else branch keeps the common case small: etcd marshals,
// logs and applies an unexecuted branch too. It answers the writes it can
// and returns the rest.
func (s *Store) attempt(ctx context.Context, items []item, results []Result) ([]item, error) {
	groups := groupByScope(items)
	cmps := make([]clientv3.Cmp, 0, len(groups))
	for gi := range groups {
		g := &groups[gi]
		if s.unfenced {
			continue
		}
		lo, hi := g.items[0].p, g.items[len(g.items)-1].p
		var c clientv3.Cmp
		c, g.raise = s.steadyCmp(g.scope, g.floor, lo.w.Token.Epoch, hi.w.Token.Epoch)
		cmps = append(cmps, c)
	}
	then, cas := s.attemptOps(groups)
	for _, it := range cas {
		cmps = append(cmps, it.p.versionCmp())
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(*then...).Commit()
	s.releaseOps(then)
	if err != nil {
		return items, fmt.Errorf("etcdfence: commit of %d writes: %w", len(items), err)
	}
	if !resp.Succeeded {
		return s.refused(ctx, items, groups, cas, results)
	}
	rev, op := resp.Header.Revision, 0
	s.cfg.Metrics.Admitted(len(items))
	for _, g := range groups {
		for _, it := range g.items {
			results[it.idx] = it.p.admitted(rev, resp.Responses[op])
			op++
		}
		if g.raise {
			op++
		}
		s.cache.raise(g.scope, g.items[len(g.items)-1].p.w.Token.Epoch)
	}
	return nil, nil
}

// attemptOps returns the Then operations of an attempt over groups, whose
// raise fields are set: the writes, by scope and epoch, each scope's
// followed by its floor where it rises. It also returns the
// compare-and-swaps among the writes. The slice comes from s.ops: give it
// back with releaseOps once the transaction is committed.
func (s *Store) attemptOps(groups []scopeGroup) (then *[]clientv3.Op, cas []*item) {
	then = s.ops.Get().(*[]clientv3.Op)
	ops := (*then)[:0]
	for _, g := range groups {
		for _, it := range g.items {
			ops = append(ops, it.p.flatOp())
			if it.p.w.Kind == KindCompareAndSwap {
				cas = append(cas, it)
			}
		}
		if g.raise {
			ops = append(ops, clientv3.OpPut(g.floor, encodeEpoch(g.items[len(g.items)-1].p.w.Token.Epoch)))
		}
	}
	*then = ops
	return then, cas
}

// releaseOps gives back a slice of attemptOps. The etcd client turns
// operations into requests as they are added to a transaction, so the slice
// is free once Commit has returned; cleared, it holds no key or value.
func (s *Store) releaseOps(then *[]clientv3.Op) {
	clear(*then)
	*then = (*then)[:0]
	s.ops.Put(then)
}

// groupByScope sorts items by token and returns them grouped by scope, each
// group's items by epoch.
func groupByScope(items []item) []scopeGroup {
	sorted := make([]*item, len(items))
	for i := range items {
		sorted[i] = &items[i]
	}
	slices.SortStableFunc(sorted, func(a, b *item) int { return a.p.w.Token.Compare(b.p.w.Token) })
	newScope := func(i int) bool { return i == 0 || sorted[i].p.w.Token.Scope != sorted[i-1].p.w.Token.Scope }
	n := 0
	for i := range sorted {
		if newScope(i) {
			n++
		}
	}
	groups := make([]scopeGroup, 0, n) // each holds a run of sorted, whose scopes are contiguous
	for i, it := range sorted {
		if newScope(i) {
			groups = append(groups, scopeGroup{scope: it.p.w.Token.Scope, floor: it.p.floor, items: sorted[i:i]})
		}
		g := &groups[len(groups)-1]
		g.items = g.items[:len(g.items)+1]
	}
	return groups
}

// refused reads, after a refused attempt, the floors of groups and the keys
// of the compare-and-swaps cas, answers the writes they refuse, and returns
// the others.
func (s *Store) refused(ctx context.Context, items []item, groups []scopeGroup, cas []*item, results []Result) ([]item, error) {
	reads := make([]clientv3.Op, 0, len(groups)+len(cas))
	for _, g := range groups {
		reads = append(reads, clientv3.OpGet(g.floor))
	}
	for _, it := range cas {
		reads = append(reads, clientv3.OpGet(it.p.full, clientv3.WithKeysOnly()))
	}
	rresp, err := s.kv.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return items, fmt.Errorf("etcdfence: read floors after a refused commit of %d writes: %w", len(items), err)
	}
	done := make(map[int]bool)
	for gi, g := range groups {
		kvs := rresp.Responses[gi].GetResponseRange().GetKvs()
		f, err := s.floorOf(g.scope, kvs)
		if len(kvs) == 0 {
			continue
		}
		for _, it := range g.items {
			refusal := err // a corrupt floor refuses every write of its scope
			if refusal == nil {
				refusal = s.belowFloor(it.p.w.Token, f)
			}
			if refusal != nil {
				results[it.idx].Err = refusal
				done[it.idx] = true
			}
		}
	}
	for i, it := range cas {
		if done[it.idx] {
			continue
		}
		if v := keyVersion(rresp.Responses[len(groups)+i]); v != it.p.w.Version {
			results[it.idx].Err = it.p.versionError(v)
			done[it.idx] = true
		}
	}
	rest := items[:0:0]
	for _, it := range items {
		if !done[it.idx] {
			rest = append(rest, it)
		}
	}
	return rest, nil
}
