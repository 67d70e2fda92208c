package etcdfence

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// This file holds everything about floors: how an epoch is stored, the
// comparisons that check a token against its scope's floor, the floors a
// Store remembers, and the operations on a floor alone (Advance, Floor).

// epochWidth is the number of decimal digits of the largest int64, the
// fixed width of an encoded floor.
const epochWidth = 19

// encodeEpoch writes e (positive) as epochWidth zero-padded decimal digits,
// so that byte-wise comparison of encodings orders epochs numerically.
func encodeEpoch(e int64) string {
	var b [epochWidth]byte
	putEpoch(b[:], e)
	return string(b[:])
}

// putEpoch writes encodeEpoch(e) into b, of length epochWidth.
func putEpoch(b []byte, e int64) {
	for i := epochWidth - 1; i >= 0; i-- {
		b[i] = byte('0' + e%10)
		e /= 10
	}
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

// admitBound returns e's encoding followed by a NUL byte. It sorts after
// that encoding (it extends it) and before the encoding of every larger
// epoch (which differs at an earlier byte), so Value(floor) < admitBound(e)
// holds iff floor <= e, even for e = MaxInt64, which has no successor.
func admitBound(e int64) []byte {
	b := make([]byte, epochWidth+1)
	putEpoch(b[:epochWidth], e)
	return b
}

// valueCmp, createCmp and versionCmp are clientv3.Compare on a key's
// Value, CreateRevision or Version without the deep copy that Compare makes
// of the comparison it builds (a reflective proto.Clone, the costliest
// step of building a transaction's checks).
func valueCmp(key string, result pb.Compare_CompareResult, value []byte) clientv3.Cmp {
	c, pc := newCmp(key, result, pb.Compare_VALUE)
	pc.TargetUnion = &pb.Compare_Value{Value: value}
	return c
}

func createCmp(key string, result pb.Compare_CompareResult, rev int64) clientv3.Cmp {
	c, pc := newCmp(key, result, pb.Compare_CREATE)
	pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: rev}
	return c
}

func versionCmp(key string, result pb.Compare_CompareResult, version int64) clientv3.Cmp {
	c, pc := newCmp(key, result, pb.Compare_VERSION)
	pc.TargetUnion = &pb.Compare_Version{Version: version}
	return c
}

func newCmp(key string, result pb.Compare_CompareResult, target pb.Compare_CompareTarget) (clientv3.Cmp, *pb.Compare) {
	var c clientv3.Cmp
	pc := c.GetCompare()
	pc.Key, pc.Result, pc.Target = []byte(key), result, target
	return c, pc
}

// FloorKey returns the etcd key that holds scope's floor.
func (s *Store) FloorKey(scope string) string { return s.fences + scope }

// staleCmp is the comparison of the single-write form: it holds iff a token
// of epoch (encoded) is older than the floor. It fails on a missing floor,
// so the Else branch, which admits, also covers a scope never written.
func staleCmp(floorKey, epoch string) clientv3.Cmp {
	return valueCmp(floorKey, pb.Compare_GREATER, []byte(epoch))
}

// steadyCmp is the comparison of the steady form for the writes of one
// scope whose epochs run from lo to hi, and whether the
// transaction must write hi as the new floor:
//
//   - a floor this Store saw absent: CreateRevision(floor) = 0, and the
//     floor is written;
//   - otherwise Value(floor) < admitBound(lo), which holds iff floor <= lo.
//     With a cached floor c <= lo, it proves c <= floor <= lo <= hi, so the
//     floor need not be written if hi == c.
func (s *Store) steadyCmp(scope, floorKey string, lo, hi int64) (cmp clientv3.Cmp, raise bool) {
	c, known := s.cache.get(scope)
	if known && c == 0 {
		return createCmp(floorKey, pb.Compare_EQUAL, 0), true
	}
	return valueCmp(floorKey, pb.Compare_LESS, admitBound(lo)), !(known && hi == c)
}

// guarded runs the transaction of the single-write form
//
//	If(Value(floor) > epoch) Then(Get(floor)) Else(els...)
//
// in which els runs iff t is not older than its scope's floor. A refusal is
// returned as stale (a *fence.StaleError); err is etcd's.
func (s *Store) guarded(ctx context.Context, t fence.Token, floor, epoch string, els ...clientv3.Op) (resp *clientv3.TxnResponse, stale, err error) {
	resp, err = s.kv.Txn(ctx).If(staleCmp(floor, epoch)).Then(clientv3.OpGet(floor)).Else(els...).Commit()
	if err == nil && resp.Succeeded {
		stale = s.staleFrom(t, resp.Responses[0])
	}
	return resp, stale, err
}

// staleFrom builds the error for t from the floor read in a refused txn.
func (s *Store) staleFrom(t fence.Token, r *pb.ResponseOp) error {
	s.cfg.Metrics.Rejected(t.Scope)
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		// The floor vanished between compare and read: impossible inside
		// one transaction, but report staleness without a current epoch.
		return fence.NewStaleError(t, 0)
	}
	cur, err := s.floorOf(t.Scope, rr.Kvs)
	if err != nil {
		return err
	}
	return fence.NewStaleError(t, cur)
}

// floorOf decodes the floor of scope from kvs, the result of reading its
// floor key, and records it in the cache: 0 if kvs is empty (no floor).
func (s *Store) floorOf(scope string, kvs []*mvccpb.KeyValue) (int64, error) {
	if len(kvs) == 0 {
		s.cache.absent(scope)
		return 0, nil
	}
	e, err := decodeEpoch(kvs[0].Value)
	if err != nil {
		return 0, fmt.Errorf("scope %q: %w", scope, err)
	}
	s.cache.raise(scope, e)
	return e, nil
}

// cachedStale returns a *fence.StaleError if t is older than the floor this
// Store has already seen for its scope (a lower bound of the real floor),
// nil if not.
func (s *Store) cachedStale(t fence.Token) error {
	if c, ok := s.cache.get(t.Scope); ok {
		return s.belowFloor(t, c)
	}
	return nil
}

// belowFloor is the fencing rule: a *fence.StaleError if t is older than
// floor (counted as a rejection), nil if it may be admitted.
func (s *Store) belowFloor(t fence.Token, floor int64) error {
	if t.Epoch < floor {
		s.cfg.Metrics.Rejected(t.Scope)
		return fence.NewStaleError(t, floor)
	}
	return nil
}

// cachedPositive reports whether this Store has seen a floor for scope.
func (s *Store) cachedPositive(scope string) bool {
	c, ok := s.cache.get(scope)
	return ok && c > 0
}

// rejectCached answers the writes whose epoch is below their scope's
// cached floor and returns the others.
func (s *Store) rejectCached(items []item, results []Result) []item {
	var out []item // nil until a write is refused: the others are copied from then on
	for i, it := range items {
		if err := s.cachedStale(it.p.w.Token); err != nil {
			results[it.idx].Err = err
			if out == nil {
				out = append(make([]item, 0, len(items)-1), items[:i]...)
			}
		} else if out != nil {
			out = append(out, it)
		}
	}
	if out == nil {
		return items // the common case: none is stale, nothing copied
	}
	return out
}

// Advance raises the floor of t's scope to t.Epoch, as a new owner does
// before its first write, so that older tokens are refused from then on
// even for keys the new owner never writes. It returns a *fence.StaleError
// if the floor is already newer than t; advancing to the current floor
// succeeds. Advance always asks etcd. With it a Store is a fence.Fencer.
func (s *Store) Advance(ctx context.Context, t fence.Token) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	floor, e := s.FloorKey(t.Scope), encodeEpoch(t.Epoch)
	_, stale, err := s.guarded(ctx, t, floor, e, clientv3.OpPut(floor, e))
	if err != nil {
		return fmt.Errorf("etcdfence: advance %s: %w", t, err)
	}
	if stale != nil {
		return stale
	}
	s.cache.raise(t.Scope, t.Epoch)
	s.cfg.Metrics.Admitted(1)
	return nil
}

// Floor returns the highest epoch admitted for scope, or 0 if none.
func (s *Store) Floor(ctx context.Context, scope string) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if err := fence.ValidateScope(scope); err != nil {
		return 0, err
	}
	resp, err := s.kv.Get(ctx, s.FloorKey(scope))
	if err != nil {
		return 0, fmt.Errorf("etcdfence: floor of %q: %w", scope, err)
	}
	return s.floorOf(scope, resp.Kvs)
}

// maxCachedScopes bounds the floor cache; past it the cache starts over.
const maxCachedScopes = 1 << 16

// floorCache remembers, per scope, the floor this process last saw. It is a
// hint that lets a write compare the floor it expects instead of rewriting
// it, never a source of truth: every write is still checked by etcd in its
// own transaction. Because floors only rise, a cached value is a lower
// bound of the real floor, so a token older than it is certainly stale.
//
// A scope is unknown (absent from the map), known to have no floor (0), or
// known to have a floor of at least the cached value (> 0). Every write
// reads it, so reads take no lock: a scope's entry is created once and
// then only raised, atomically.
type floorCache struct {
	m sync.Map     // scope -> *atomic.Int64
	n atomic.Int64 // entries created since the map was last cleared
}

func (c *floorCache) get(scope string) (int64, bool) {
	v, ok := c.m.Load(scope)
	if !ok {
		return 0, false
	}
	return v.(*atomic.Int64).Load(), true
}

// raise records that scope's floor is at least e (> 0).
func (c *floorCache) raise(scope string, e int64) {
	a := c.entry(scope, e)
	for {
		cur := a.Load()
		if cur >= e || a.CompareAndSwap(cur, e) {
			return
		}
	}
}

// absent records that scope had no floor when last read.
func (c *floorCache) absent(scope string) { c.entry(scope, 0).Store(0) }

// entry returns scope's entry, created with value init if there is none.
// Past maxCachedScopes entries, the cache starts over.
func (c *floorCache) entry(scope string, init int64) *atomic.Int64 {
	if v, ok := c.m.Load(scope); ok {
		return v.(*atomic.Int64)
	}
	if c.n.Add(1) > maxCachedScopes {
		c.m.Clear()
		c.n.Store(1)
	}
	a := new(atomic.Int64)
	a.Store(init)
	v, loaded := c.m.LoadOrStore(scope, a)
	if loaded {
		c.n.Add(-1)
	}
	return v.(*atomic.Int64)
}
