package etcdfence

import (
	"fmt"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// This file holds everything about floors: how an epoch is stored, the
// comparisons that check a token against its scope's floor, and the floors
// a Store remembers (floorCache, the one record of them in this package).

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

// staleCmp is the comparison of the single-write form: it holds iff a token
// of epoch is older than the floor. It fails on a missing floor, so the
// Else branch, which admits, also covers a scope never written.
func staleCmp(floorKey string, epoch int64) clientv3.Cmp {
	return valueCmp(floorKey, pb.Compare_GREATER, []byte(encodeEpoch(epoch)))
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
	c, known := s.floors.get(scope)
	if known && c == 0 {
		return createCmp(floorKey, pb.Compare_EQUAL, 0), true
	}
	return valueCmp(floorKey, pb.Compare_LESS, admitBound(lo)), !(known && hi == c)
}

// staleFrom builds the error for t from the floor read in a refused txn.
func (s *Store) staleFrom(t fence.Token, r *pb.ResponseOp) error {
	s.metrics.Rejected(t.Scope)
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		// The floor vanished between compare and read: impossible inside
		// one transaction, but report staleness without a current epoch.
		return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch}
	}
	cur, err := s.floorOf(t.Scope, rr.Kvs)
	if err != nil {
		return err
	}
	return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur}
}

// floorOf decodes the floor of scope from kvs, the result of reading its
// floor key, and records it in the cache: 0 if kvs is empty (no floor).
func (s *Store) floorOf(scope string, kvs []*mvccpb.KeyValue) (int64, error) {
	if len(kvs) == 0 {
		s.floors.absent(scope)
		return 0, nil
	}
	e, err := decodeEpoch(kvs[0].Value)
	if err != nil {
		return 0, fmt.Errorf("scope %q: %w", scope, err)
	}
	s.floors.raise(scope, e)
	return e, nil
}

// cachedStale returns a *fence.StaleError if t is older than the floor this
// Store has already seen for its scope (a lower bound of the real floor),
// nil if not.
func (s *Store) cachedStale(t fence.Token) error {
	if c, ok := s.floors.get(t.Scope); ok {
		return s.belowFloor(t, c)
	}
	return nil
}

// belowFloor is the fencing rule: a *fence.StaleError if t is older than
// floor (counted as a rejection), nil if it may be admitted.
func (s *Store) belowFloor(t fence.Token, floor int64) error {
	if t.Epoch < floor {
		s.metrics.Rejected(t.Scope)
		return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: floor}
	}
	return nil
}

// rejectCached answers the writes whose epoch is below their scope's
// cached floor and returns the others.
func (s *Store) rejectCached(entries []entry, results []Result) []entry {
	var out []entry // nil until a write is refused: the others are copied from then on
	for i := range entries {
		if err := s.cachedStale(entries[i].Token); err != nil {
			results[entries[i].idx].Err = err
			if out == nil {
				out = append(make([]entry, 0, len(entries)-1), entries[:i]...)
			}
		} else if out != nil {
			out = append(out, entries[i])
		}
	}
	if out == nil {
		return entries // the common case: none is stale, nothing copied
	}
	return out
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

// positive reports whether a floor was seen for scope.
func (c *floorCache) positive(scope string) bool {
	f, ok := c.get(scope)
	return ok && f > 0
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
