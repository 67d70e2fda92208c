package etcdfence

import (
	"context"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// WriteKind says what a Write does.
type WriteKind uint8

// The kinds of Write.
const (
	// KindPut writes Value at Key.
	KindPut WriteKind = iota + 1
	// KindDelete deletes Key.
	KindDelete
	// KindCompareAndSwap writes Value at Key iff Key's version is Version
	// (0: Key must not exist).
	KindCompareAndSwap
)

// String returns the kind's name.
func (k WriteKind) String() string {
	switch k {
	case KindPut:
		return "put"
	case KindDelete:
		return "delete"
	case KindCompareAndSwap:
		return "compare-and-swap"
	}
	return fmt.Sprintf("WriteKind(%d)", uint8(k))
}

// Write is one fenced write for Store.Commit or a Batcher. Build it with
// PutWrite, DeleteWrite or CompareAndSwapWrite.
type Write struct {
	// Kind says what the write does.
	Kind WriteKind
	// Token fences the write.
	Token fence.Token
	// Key is the data key, without the store's prefix.
	Key string
	// Value is written by KindPut and KindCompareAndSwap.
	Value []byte
	// Version is the version KindCompareAndSwap expects Key to have.
	Version int64
}

// PutWrite returns the Write that puts value at key under t.
func PutWrite(t fence.Token, key string, value []byte) Write {
	return Write{Kind: KindPut, Token: t, Key: key, Value: value}
}

// DeleteWrite returns the Write that deletes key under t.
func DeleteWrite(t fence.Token, key string) Write {
	return Write{Kind: KindDelete, Token: t, Key: key}
}

// CompareAndSwapWrite returns the Write that puts value at key under t iff
// key's version is version (0: key must not exist).
func CompareAndSwapWrite(t fence.Token, key string, version int64, value []byte) Write {
	return Write{Kind: KindCompareAndSwap, Token: t, Key: key, Version: version, Value: value}
}

// Result is the outcome of one Write.
type Result struct {
	// Revision is the etcd revision at which the write committed; 0 if it
	// did not. Writes committed together share a revision.
	Revision int64
	// Deleted reports, for KindDelete, whether the key existed.
	Deleted bool
	// Err is nil if the write committed. Otherwise it is a
	// *fence.StaleError (errors.Is fence.ErrStale), a *VersionError, a
	// validation error (fence.ErrInvalidToken, ErrInvalidKey,
	// ErrValueTooLarge, ErrInvalidWrite), or the etcd or context error of a
	// transaction that failed as a whole, in which case the write may or
	// may not have been applied.
	Err error
}

// prepared is a validated write with its etcd keys.
type prepared struct {
	w     Write
	full  string // data key with prefix
	floor string // floor key of the token's scope
	epoch string // encoded epoch
}

func (s *Store) prepare(w Write) (prepared, error) {
	if err := w.Token.Validate(); err != nil {
		return prepared{}, err
	}
	switch w.Kind {
	case KindPut, KindCompareAndSwap:
		if w.Kind == KindCompareAndSwap && w.Version < 0 {
			return prepared{}, fmt.Errorf("%w: negative version %d", ErrInvalidWrite, w.Version)
		}
		if err := s.checkValue(w.Value); err != nil {
			return prepared{}, err
		}
	case KindDelete:
		if w.Value != nil {
			return prepared{}, fmt.Errorf("%w: delete of %q carries a value", ErrInvalidWrite, w.Key)
		}
	default:
		return prepared{}, fmt.Errorf("%w: unknown kind %d", ErrInvalidWrite, uint8(w.Kind))
	}
	full, err := s.dataKey(w.Key)
	if err != nil {
		return prepared{}, err
	}
	return prepared{w: w, full: full, floor: s.FloorKey(w.Token.Scope), epoch: encodeEpoch(w.Token.Epoch)}, nil
}

// singleOps are the Else operations of the single-write form: record the
// epoch and write. A compare-and-swap nests its version check, so that a
// refused swap records nothing, as in a flat transaction.
func (p prepared) singleOps() []clientv3.Op {
	put := clientv3.OpPut(p.floor, p.epoch)
	if p.w.Kind == KindCompareAndSwap {
		return []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{p.versionCmp()},
			[]clientv3.Op{put, p.flatOp()},
			[]clientv3.Op{clientv3.OpGet(p.full, clientv3.WithKeysOnly())},
		)}
	}
	return []clientv3.Op{put, p.flatOp()}
}

// flatOp is the data operation of the write in a transaction whose If
// holds every check (a compare-and-swap's version comparison included).
func (p prepared) flatOp() clientv3.Op {
	if p.w.Kind == KindDelete {
		return clientv3.OpDelete(p.full)
	}
	return clientv3.OpPut(p.full, string(p.w.Value))
}

func (p prepared) versionCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.Version(p.full), "=", p.w.Version)
}

// size estimates the bytes the write adds to a transaction request.
func (p prepared) size() int {
	return len(p.full) + len(p.w.Value) + 3*len(p.floor) + 2*len(p.epoch) + 64
}

// writeSizeBound is the largest size of one write under c.
func (c Config) writeSizeBound() int {
	return c.MaxKeyLen + c.MaxValueLen + 3*(len(c.FencePrefix)+fence.MaxScopeLen) + 2*epochWidth + 64
}

// admitted is the Result of a write admitted at revision rev, given the
// response to its data operation.
func (p prepared) admitted(rev int64, r *pb.ResponseOp) Result {
	if p.w.Kind == KindDelete {
		return Result{Revision: rev, Deleted: r.GetResponseDeleteRange().GetDeleted() > 0}
	}
	return Result{Revision: rev}
}

// singleResult reads the outcome of an admitted write in the single-write
// form from the Else responses of singleOps.
func (p prepared) singleResult(rev int64, rs []*pb.ResponseOp) Result {
	if p.w.Kind != KindCompareAndSwap {
		return p.admitted(rev, rs[1])
	}
	tr := rs[0].GetResponseTxn()
	if tr.GetSucceeded() {
		return Result{Revision: rev}
	}
	var actual int64
	if inner := tr.GetResponses(); len(inner) > 0 {
		actual = keyVersion(inner[0])
	}
	return Result{Err: p.versionError(actual)}
}

func (p prepared) versionError(actual int64) error {
	return &VersionError{Key: p.w.Key, Expected: p.w.Version, Actual: actual}
}

// keyVersion is the version of the key read by r, 0 if it does not exist.
func keyVersion(r *pb.ResponseOp) int64 {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].Version
	}
	return 0
}

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
	return results, s.commitItems(ctx, items, results)
}

// commitItems commits prepared items, each answered in results[item.idx].
func (s *Store) commitItems(ctx context.Context, items []item, results []Result) error {
	var failed error
	for _, chunk := range s.plan(items) {
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

// plan splits items, in order, into chunks that each fit one transaction:
// at most MaxTxnOps operations as etcd counts them (a data operation per
// write plus a floor operation per scope in the largest branch), at most
// MaxTxnBytes, and no key written twice.
func (s *Store) plan(items []item) [][]item {
	var chunks [][]item
	var cur []item
	keys := make(map[string]struct{})
	scopes := make(map[string]struct{})
	bytes := 0
	flush := func() {
		if len(cur) > 0 {
			chunks = append(chunks, cur)
		}
		cur = nil
		clear(keys)
		clear(scopes)
		bytes = 0
	}
	for _, it := range items {
		_, dupKey := keys[it.p.full]
		_, oldScope := scopes[it.p.w.Token.Scope]
		ops := len(cur) + 1 + len(scopes)
		if !oldScope {
			ops++
		}
		size := it.p.size()
		if len(cur) > 0 && (dupKey || ops > s.cfg.MaxTxnOps || bytes+size > s.cfg.MaxTxnBytes) {
			flush()
		}
		cur = append(cur, it)
		keys[it.p.full] = struct{}{}
		scopes[it.p.w.Token.Scope] = struct{}{}
		bytes += size
	}
	flush()
	return chunks
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

func (s *Store) cachedPositive(scope string) bool {
	c, ok := s.cache.get(scope)
	return ok && c > 0
}

// rejectCached answers the writes whose epoch is below their scope's
// cached floor (a lower bound of the real floor) and returns the others.
func (s *Store) rejectCached(items []item, results []Result) []item {
	out := items[:0:0]
	for _, it := range items {
		if err := s.cachedStale(it.p.w.Token); err != nil {
			results[it.idx].Err = err
			continue
		}
		out = append(out, it)
	}
	return out
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
	resp, stale, err := s.guarded(ctx, p.w.Token, p.floor, p.epoch, p.singleOps()...)
	if err != nil {
		return Result{}, fmt.Errorf("etcdfence: %s %q: %w", p.w.Kind, p.w.Key, err)
	}
	if stale != nil {
		return Result{Err: stale}, nil
	}
	r := p.singleResult(resp.Header.Revision, resp.Responses)
	if r.Err == nil {
		s.cache.raise(p.w.Token.Scope, p.w.Token.Epoch)
	}
	return r, nil
}

// admitBound returns an encoded epoch followed by a NUL byte. It sorts after
// that encoding (it extends it) and before the encoding of every larger
// epoch (which differs at an earlier byte), so Value(floor) <
// admitBound(encodeEpoch(e)) holds iff floor <= e, even for e = MaxInt64,
// which has no successor.
func admitBound(enc string) string { return enc + "\x00" }

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
// If a check fails, a second, read-only transaction reads the floors and
// compared keys: a floor above a write's epoch refuses it (floors only
// rise, so it was stale when refused), a version other than expected
// refuses a compare-and-swap. Leaving the reads out of the first
// transaction's Else branch keeps the common case small: etcd marshals,
// logs and applies an unexecuted branch too. It answers the writes it can
// and returns the rest.
func (s *Store) attempt(ctx context.Context, items []item, results []Result) ([]item, error) {
	sorted := make([]*item, len(items))
	for i := range items {
		sorted[i] = &items[i]
	}
	slices.SortStableFunc(sorted, func(a, b *item) int { return a.p.w.Token.Compare(b.p.w.Token) })
	var groups []scopeGroup // each holds a run of sorted, whose scopes are contiguous
	for i, it := range sorted {
		if i == 0 || it.p.w.Token.Scope != sorted[i-1].p.w.Token.Scope {
			groups = append(groups, scopeGroup{scope: it.p.w.Token.Scope, floor: it.p.floor, items: sorted[i:i]})
		}
		g := &groups[len(groups)-1]
		g.items = g.items[:len(g.items)+1]
	}

	cmps := make([]clientv3.Cmp, 0, len(groups)+len(sorted))
	then := make([]clientv3.Op, 0, len(sorted)+len(groups))
	var cas []*item
	for gi := range groups {
		g := &groups[gi]
		lo, hi := g.items[0].p, g.items[len(g.items)-1].p
		c, known := s.cache.get(g.scope)
		g.raise = true
		if known && c == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(g.floor), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(g.floor), "<", admitBound(lo.epoch)))
			// With a cached floor c <= lowest epoch, the check proves
			// c <= floor <= lowest <= highest: no write needed if highest == c.
			g.raise = !(known && hi.w.Token.Epoch == c)
		}
		for _, it := range g.items {
			then = append(then, it.p.flatOp())
			if it.p.w.Kind == KindCompareAndSwap {
				cas = append(cas, it)
			}
		}
		if g.raise {
			then = append(then, clientv3.OpPut(g.floor, hi.epoch))
		}
	}
	for _, it := range cas {
		cmps = append(cmps, it.p.versionCmp())
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		return items, fmt.Errorf("etcdfence: commit of %d writes: %w", len(items), err)
	}
	if resp.Succeeded {
		rev, op := resp.Header.Revision, 0
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

	// Refused: read the floors and compared keys to learn why.
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
			switch {
			case err != nil:
				results[it.idx].Err = err
			case it.p.w.Token.Epoch < f:
				results[it.idx].Err = fence.NewStaleError(it.p.w.Token, f)
			default:
				continue
			}
			done[it.idx] = true
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
