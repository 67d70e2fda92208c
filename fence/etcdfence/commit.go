package etcdfence

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file commits entries: Commit's, a Batcher's batches and the one
// write of Store.Put and its kin. plan splits them into chunks that fit
// one transaction; commitChunk runs a chunk's transactions, in the
// single-write form (single) for a lone write whose floor is not known,
// otherwise as flat transactions (attempt), and after a refused one reads
// back which writes were refused (refused).

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
	entries := make([]entry, 0, len(writes))
	for i, w := range writes {
		e, err := s.entry(w, i)
		if err != nil {
			results[i].Err = err
			continue
		}
		entries = append(entries, e)
	}
	return results, s.commitEntries(ctx, entries, results, false)
}

// commitEntries commits entries, each answered in results[entry.idx].
// distinct says that no two entries write the same key.
func (s *Store) commitEntries(ctx context.Context, entries []entry, results []Result, distinct bool) error {
	var failed error
	for _, chunk := range s.plan(entries, distinct) {
		if failed != nil {
			for _, e := range chunk {
				results[e.idx].Err = failed
			}
			continue
		}
		if err := s.commitChunk(ctx, chunk, results); err != nil {
			failed = err
		}
	}
	return failed
}

// plan splits entries, in order, into chunks that each fit one
// transaction: at most MaxTxnOps operations as etcd counts them (a data
// operation per write and a floor operation per scope in the largest
// branch), at most MaxTxnBytes, and no key written twice. Entries that fit
// one transaction even with a scope each, and write distinct keys, are one
// chunk, found without counting scopes. distinct says that no two entries
// write the same key (as in a Batcher's batch).
func (s *Store) plan(entries []entry, distinct bool) [][]entry {
	if 2*len(entries) <= s.cfg.MaxTxnOps {
		bytes := 0
		for i := range entries {
			bytes += entries[i].size()
		}
		if bytes <= s.cfg.MaxTxnBytes && (distinct || distinctKeys(entries)) {
			return [][]entry{entries}
		}
	}
	var chunks [][]entry
	start, bytes := 0, 0
	keys := make(map[string]struct{}, min(len(entries), s.cfg.MaxTxnOps))
	scopes := make(map[string]struct{}, min(len(entries), s.cfg.MaxTxnOps))
	for i := range entries {
		e := &entries[i]
		_, dupKey := keys[e.full]
		_, oldScope := scopes[e.Token.Scope]
		ops := i - start + 1 + len(scopes)
		if !oldScope {
			ops++
		}
		if i > start && (dupKey || ops > s.cfg.MaxTxnOps || bytes+e.size() > s.cfg.MaxTxnBytes) {
			chunks = append(chunks, entries[start:i:i])
			start, bytes = i, 0
			clear(keys)
			clear(scopes)
		}
		keys[e.full] = struct{}{}
		scopes[e.Token.Scope] = struct{}{}
		bytes += e.size()
	}
	if start < len(entries) {
		chunks = append(chunks, entries[start:])
	}
	return chunks
}

// smallDistinct is the number of entries up to which distinctKeys compares
// every pair rather than fill a map: fewer string comparisons than a map's
// hashing, and no allocation.
const smallDistinct = 24

// distinctKeys reports whether no two entries write the same key.
func distinctKeys(entries []entry) bool {
	if len(entries) <= smallDistinct {
		for i := range entries {
			for j := range i {
				if entries[i].full == entries[j].full {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(entries))
	for i := range entries {
		if _, dup := seen[entries[i].full]; dup {
			return false
		}
		seen[entries[i].full] = struct{}{}
	}
	return true
}

// maxAttempts bounds the transactions one chunk may take. Every failed
// attempt resolves a write or corrects a known floor, so only floors that
// keep changing under the commit (deleted and recreated) can reach it.
func maxAttempts(n int) int { return 2*n + 4 }

// commitChunk commits one planned chunk and fills in its results.
//
// Writes older than the known floor of their scope are refused at once.
// The rest go in one flat transaction that holds, per scope, one
// comparison on its floor (and per compare-and-swap one on its key's
// version): if every check holds, every write commits. If one fails, the
// floors and versions are read, the writes they refuse are answered, and
// the others go again; each failed attempt answers at least one write or
// corrects a known floor. A lone write whose floor is not known takes the
// single-write form, which needs none.
func (s *Store) commitChunk(ctx context.Context, chunk []entry, results []Result) error {
	pending := s.rejectCached(chunk, results)
	for attempt := 0; len(pending) > 0; attempt++ {
		var err error
		switch {
		case attempt == maxAttempts(len(chunk)):
			err = fmt.Errorf("etcdfence: floors of %d writes kept changing during commit; gave up after %d transactions", len(pending), attempt)
		case len(pending) == 1 && !s.floors.positive(pending[0].Token.Scope):
			var r Result
			if r, err = s.single(ctx, &pending[0]); err == nil {
				results[pending[0].idx] = r
				pending = nil
			}
		default:
			pending, err = s.attempt(ctx, pending, results)
		}
		if err != nil {
			for _, e := range pending {
				results[e.idx].Err = err
			}
			return err
		}
	}
	return nil
}

// single runs one write in the single-write form, which needs no known
// floor:
//
//	If(Value(floor) > epoch) Then(Get(floor)) Else(Put(floor, epoch), write)
//
// The comparison fails on a missing floor, so the Else branch admits a
// scope never written, and records the epoch in the same transaction (a
// compare-and-swap nests its version check around both). Refusals come
// back in Result.Err; the error is reserved for etcd failures.
func (s *Store) single(ctx context.Context, e *entry) (Result, error) {
	resp, stale, err := s.guarded(ctx, e.Token, e.floor, e.singleOps()...)
	if err != nil {
		return Result{}, fmt.Errorf("etcdfence: %s %q: %w", e.Kind, e.Key, err)
	}
	if stale != nil {
		return Result{Err: stale}, nil
	}
	s.metrics.Admitted(1)
	r := e.singleResult(resp.Header.Revision, resp.Responses)
	if r.Err == nil {
		s.floors.raise(e.Token.Scope, e.Token.Epoch)
	}
	return r, nil
}

// scopeGroup is the writes of one scope within an attempt, by epoch.
type scopeGroup struct {
	entries []*entry
	raise   bool // the transaction writes the floor
}

func (g *scopeGroup) lo() *entry { return g.entries[0] }
func (g *scopeGroup) hi() *entry { return g.entries[len(g.entries)-1] }

// attempt runs one flat transaction for pending (distinct keys, none below
// its known floor):
//
//	If(per scope: Value(floor) < admitBound(lowest epoch)   [or CreateRevision(floor) = 0 if known absent],
//	   per compare-and-swap: Version(key) = expected)
//	Then(the writes, by scope and epoch; Put(floor, highest epoch) where it rises)
//
// Every scope's floor is compared as etcd records it, whoever wrote it: the
// known floor only decides which comparison to make and whether the floor
// must be written (see steadyCmp), never whether a write is admitted. If a
// check fails, refused reads the floors and compared keys in a second,
// read-only transaction. Leaving the reads out of the first transaction's
// Else branch keeps the common case small: etcd marshals, logs and applies
// an unexecuted branch too. It answers the writes it can and returns the
// rest.
func (s *Store) attempt(ctx context.Context, pending []entry, results []Result) ([]entry, error) {
	groups := groupByScope(pending)
	cmps := make([]clientv3.Cmp, 0, len(groups))
	for gi := range groups {
		g := &groups[gi]
		if s.unfenced {
			continue
		}
		var c clientv3.Cmp
		c, g.raise = s.steadyCmp(g.lo().Token.Scope, g.lo().floor, g.lo().Token.Epoch, g.hi().Token.Epoch)
		cmps = append(cmps, c)
	}
	then, cas := s.attemptOps(groups)
	for _, e := range cas {
		cmps = append(cmps, e.versionCmp())
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(*then...).Commit()
	s.releaseOps(then)
	if err != nil {
		return pending, fmt.Errorf("etcdfence: commit of %d writes: %w", len(pending), err)
	}
	if !resp.Succeeded {
		return s.refused(ctx, pending, groups, cas, results)
	}
	rev, op := resp.Header.Revision, 0
	s.metrics.Admitted(len(pending))
	for _, g := range groups {
		for _, e := range g.entries {
			results[e.idx] = e.admitted(rev, resp.Responses[op])
			op++
		}
		if g.raise {
			op++
		}
		s.floors.raise(g.hi().Token.Scope, g.hi().Token.Epoch)
	}
	return nil, nil
}

// attemptOps returns the Then operations of an attempt over groups, whose
// raise fields are set: the writes, by scope and epoch, each scope's
// followed by its floor where it rises. It also returns the
// compare-and-swaps among the writes. The slice comes from s.ops: give it
// back with releaseOps once the transaction is committed.
func (s *Store) attemptOps(groups []scopeGroup) (then *[]clientv3.Op, cas []*entry) {
	then = s.ops.Get().(*[]clientv3.Op)
	ops := (*then)[:0]
	for _, g := range groups {
		for _, e := range g.entries {
			ops = append(ops, e.flatOp())
			if e.Kind == KindCompareAndSwap {
				cas = append(cas, e)
			}
		}
		if g.raise {
			ops = append(ops, clientv3.OpPut(g.hi().floor, encodeEpoch(g.hi().Token.Epoch)))
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

// groupByScope sorts entries by token and returns them grouped by scope,
// each group's entries by epoch.
func groupByScope(entries []entry) []scopeGroup {
	sorted := make([]*entry, len(entries))
	for i := range entries {
		sorted[i] = &entries[i]
	}
	slices.SortStableFunc(sorted, func(a, b *entry) int { return a.Token.Compare(b.Token) })
	var groups []scopeGroup // each holds a run of sorted, whose scopes are contiguous
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].Token.Scope == sorted[i].Token.Scope {
			j++
		}
		groups = append(groups, scopeGroup{entries: sorted[i:j:j]})
		i = j
	}
	return groups
}

// refused reads, after a refused attempt, the floors of groups and the keys
// of the compare-and-swaps cas, answers the writes they refuse, and returns
// the others: a floor above a write's epoch refuses it (floors only rise,
// so it was stale when refused), a version other than expected refuses a
// compare-and-swap.
func (s *Store) refused(ctx context.Context, pending []entry, groups []scopeGroup, cas []*entry, results []Result) ([]entry, error) {
	reads := make([]clientv3.Op, 0, len(groups)+len(cas))
	for _, g := range groups {
		reads = append(reads, clientv3.OpGet(g.lo().floor))
	}
	for _, e := range cas {
		reads = append(reads, clientv3.OpGet(e.full, clientv3.WithKeysOnly()))
	}
	rresp, err := s.kv.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return pending, fmt.Errorf("etcdfence: read floors after a refused commit of %d writes: %w", len(pending), err)
	}
	done := make(map[int]bool)
	for gi, g := range groups {
		kvs := rresp.Responses[gi].GetResponseRange().GetKvs()
		f, err := s.floorOf(g.lo().Token.Scope, kvs)
		if len(kvs) == 0 {
			continue
		}
		for _, e := range g.entries {
			refusal := err // a corrupt floor refuses every write of its scope
			if refusal == nil {
				refusal = s.belowFloor(e.Token, f)
			}
			if refusal != nil {
				results[e.idx].Err = refusal
				done[e.idx] = true
			}
		}
	}
	for i, e := range cas {
		if done[e.idx] {
			continue
		}
		if v := keyVersion(rresp.Responses[len(groups)+i]); v != e.Version {
			results[e.idx].Err = e.versionError(v)
			done[e.idx] = true
		}
	}
	rest := pending[:0:0]
	for _, e := range pending {
		if !done[e.idx] {
			rest = append(rest, e)
		}
	}
	return rest, nil
}
