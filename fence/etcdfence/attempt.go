package etcdfence

import (
	"context"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file runs one flat transaction for the writes of a planned chunk
// and sorts out which writes a refused one refuses.

// scopeGroup is the writes of one scope within an attempt.
type scopeGroup struct {
	scope, floor string
	items        []*item // by epoch
	raise        bool    // the transaction writes the floor
	known        int64   // in the generation form: the floor, known exactly
}

// attempt runs one flat transaction for items (distinct keys, none below
// its cached floor), in the generation form (see generation.go) when the
// Store knows every scope's floor at the current generation, or else in the
// steady form:
//
//	If(per scope: Value(floor) < admitBound(lowest epoch)   [or CreateRevision(floor) = 0 if known absent],
//	   per compare-and-swap: Version(key) = expected)
//	Then(the writes, by scope and epoch; Put(floor, highest epoch) where it rises [, Put(generation)]
//	     [, Get(generation), Get(floor) per scope: to learn the generation])
//
// If a check fails, a second, read-only transaction reads the floors and
// compared keys: a floor above a write's epoch refuses it (floors only
// rise, so it was stale when refused), a version other than expected
// refuses a compare-and-swap. Leaving the reads out of the first
// transaction's Else branch keeps the common case small: etcd marshals,
// logs and applies an unexecuted branch too. It answers the writes it can
// and returns the rest. Only the first attempt of a chunk may take the
// generation form; if it fails, it answers nothing, and its writes go again
// in the steady form.
func (s *Store) attempt(ctx context.Context, items []item, results []Result, first bool) ([]item, error) {
	groups := groupByScope(items)
	gen, useGen, refresh := s.gen.plan(groups, first)
	if s.unfenced {
		useGen, refresh = false, false
	}

	cmps := make([]clientv3.Cmp, 0, len(groups)+1)
	if useGen {
		cmps = append(cmps, s.genCmp(gen))
	}
	raises := false // the transaction writes a floor
	for gi := range groups {
		g := &groups[gi]
		lo, hi := g.items[0].p, g.items[len(g.items)-1].p
		switch {
		case s.unfenced:
		case useGen:
			g.raise = hi.w.Token.Epoch > g.known
		default:
			var c clientv3.Cmp
			c, g.raise = s.steadyCmp(g.scope, g.floor, lo.w.Token.Epoch, hi.w.Token.Epoch)
			cmps = append(cmps, c)
		}
		raises = raises || g.raise
	}
	// A steady form that writes the generation reads it back, so as not
	// to make the next batch's generation form fail on it.
	refresh = refresh || (raises && !useGen && len(groups) >= 2)
	then, cas, reads := s.attemptOps(groups, raises, refresh)
	for _, it := range cas {
		cmps = append(cmps, it.p.versionCmp())
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(*then...).Commit()
	s.releaseOps(then)
	if err != nil {
		return items, fmt.Errorf("etcdfence: commit of %d writes: %w", len(items), err)
	}
	if !resp.Succeeded {
		if useGen {
			s.gen.missed(gen)
			return items, nil
		}
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
	switch {
	case useGen && raises:
		scopes, floors := groupFloors(groups, nil)
		s.gen.raised(gen, rev, scopes, floors)
	case useGen:
		s.gen.held()
	case reads > 0:
		s.learnFrom(rev, groups, resp.Responses[reads:])
	case raises:
		s.gen.invalidate()
	}
	return nil, nil
}

// attemptOps returns the Then operations of an attempt over groups, whose
// raise fields are set: the writes, by scope and epoch, each followed by
// its scope's floor where it rises, and the generation if a floor rises;
// with refresh, and room left under MaxTxnOps, then the reads of the
// generation and the floors, from index reads (0: no reads). It also
// returns the compare-and-swaps among the writes. The slice comes from
// s.ops: give it back with releaseOps once the transaction is committed.
func (s *Store) attemptOps(groups []scopeGroup, raises, refresh bool) (then *[]clientv3.Op, cas []*item, reads int) {
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
	if raises {
		ops = append(ops, s.genPut())
	}
	if refresh && len(ops)+1+len(groups) <= s.cfg.MaxTxnOps {
		reads = len(ops)
		ops = append(ops, clientv3.OpGet(s.GenerationKey(), clientv3.WithKeysOnly()))
		for _, g := range groups {
			ops = append(ops, clientv3.OpGet(g.floor))
		}
	}
	*then = ops
	return then, cas, reads
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

// groupFloors returns the scopes of groups and the floors a successful
// transaction left them at: the highest epoch of each group that raised
// its floor, else what floors says (the floors read), or the known floor.
func groupFloors(groups []scopeGroup, read []int64) (scopes []string, floors []int64) {
	scopes, floors = make([]string, len(groups)), make([]int64, len(groups))
	for i, g := range groups {
		scopes[i] = g.scope
		switch {
		case g.raise:
			floors[i] = g.items[len(g.items)-1].p.w.Token.Epoch
		case read != nil:
			floors[i] = read[i]
		default:
			floors[i] = g.known
		}
	}
	return scopes, floors
}

// learnFrom records the generation and the floors of groups read back by a
// transaction at revision rev: rs holds Get(generation), then Get(floor)
// per group. A floor that does not decode is not learnt.
func (s *Store) learnFrom(rev int64, groups []scopeGroup, rs []*pb.ResponseOp) {
	read := make([]int64, len(groups))
	for i, g := range groups {
		f, err := s.floorOf(g.scope, rs[1+i].GetResponseRange().GetKvs())
		if err != nil {
			return
		}
		read[i] = f
	}
	scopes, floors := groupFloors(groups, read)
	s.gen.learn(rev, modRevision(rs[0]), scopes, floors)
}

// modRevision is the ModRevision of the key read by r, 0 if it does not
// exist.
func modRevision(r *pb.ResponseOp) int64 {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].ModRevision
	}
	return 0
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
	reads = append(reads, clientv3.OpGet(s.GenerationKey(), clientv3.WithKeysOnly()))
	rresp, err := s.kv.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return items, fmt.Errorf("etcdfence: read floors after a refused commit of %d writes: %w", len(items), err)
	}
	done := make(map[int]bool)
	var scopes []string
	var floors []int64
	for gi, g := range groups {
		kvs := rresp.Responses[gi].GetResponseRange().GetKvs()
		f, err := s.floorOf(g.scope, kvs)
		if err == nil {
			scopes, floors = append(scopes, g.scope), append(floors, f)
		}
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
	s.gen.learn(rresp.Header.Revision, modRevision(rresp.Responses[len(reads)-1]), scopes, floors)
	rest := items[:0:0]
	for _, it := range items {
		if !done[it.idx] {
			rest = append(rest, it)
		}
	}
	return rest, nil
}
