package etcdfence

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// This file holds what a write is: the public Write and Result, and entry,
// a validated Write with its etcd keys, which turns itself into etcd
// operations and reads its outcome back from etcd's responses.

// WriteKind says what a Write does: its value is the operation's name.
type WriteKind string

// The kinds of Write.
const (
	// KindPut writes Value at Key, as Store.Put.
	KindPut WriteKind = "put"
	// KindDelete deletes Key, as Store.Delete.
	KindDelete WriteKind = "delete"
	// KindCompareAndSwap writes Value at Key iff Key's version is Version
	// (0: Key must not exist), as Store.CompareAndSwap.
	KindCompareAndSwap WriteKind = "compare-and-swap"
)

// Write is one fenced write for Store.Commit.
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
	// ErrInvalidWrite), or the etcd or context error of a
	// transaction that failed as a whole, in which case the write may or
	// may not have been applied.
	Err error
}

// entry is a validated Write with its etcd keys and idx, the index of its
// Result in the caller's slice. Every path to etcd carries writes as
// entries: Store.Put and its kin (one entry), Commit (one per Write) and a
// Batcher's batch (one per key).
type entry struct {
	Write
	idx   int
	full  string // data key with prefix
	floor string // floor key of the token's scope
}

// entry validates w and returns it as the entry of index idx.
func (s *Store) entry(w Write, idx int) (entry, error) {
	if err := s.usable(); err != nil {
		return entry{}, err
	}
	if err := w.Token.Validate(); err != nil {
		return entry{}, err
	}
	switch w.Kind {
	case KindPut, KindCompareAndSwap:
		if w.Kind == KindCompareAndSwap && w.Version < 0 {
			return entry{}, fmt.Errorf("%w: negative version %d", ErrInvalidWrite, w.Version)
		}
		if err := s.checkValue(w.Value); err != nil {
			return entry{}, err
		}
	case KindDelete:
		if w.Value != nil {
			return entry{}, fmt.Errorf("%w: delete of %q carries a value", ErrInvalidWrite, w.Key)
		}
	default:
		return entry{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidWrite, string(w.Kind))
	}
	full, err := s.dataKey(w.Key)
	if err != nil {
		return entry{}, err
	}
	return entry{Write: w, idx: idx, full: full, floor: s.floorKey(w.Token.Scope)}, nil
}

// singleOps are the Else operations of the single-write form: record the
// epoch and write. A compare-and-swap nests its version check, so that a
// refused swap records nothing, as in a flat transaction.
func (e *entry) singleOps() []clientv3.Op {
	put := clientv3.OpPut(e.floor, encodeEpoch(e.Token.Epoch))
	if e.Kind == KindCompareAndSwap {
		return []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{e.versionCmp()},
			[]clientv3.Op{put, e.flatOp()},
			[]clientv3.Op{clientv3.OpGet(e.full, clientv3.WithKeysOnly())},
		)}
	}
	return []clientv3.Op{put, e.flatOp()}
}

// flatOp is the data operation of the write in a transaction whose If
// holds every check (a compare-and-swap's version comparison included).
func (e *entry) flatOp() clientv3.Op {
	if e.Kind == KindDelete {
		return clientv3.OpDelete(e.full)
	}
	return clientv3.OpPut(e.full, string(e.Value))
}

func (e *entry) versionCmp() clientv3.Cmp {
	return versionCmp(e.full, pb.Compare_EQUAL, e.Version)
}

// size estimates the bytes the write adds to a transaction request.
func (e *entry) size() int {
	return len(e.full) + len(e.Value) + 3*len(e.floor) + 2*epochWidth + 64
}

// writeSizeBound is the largest size of one write under c.
func (c Config) writeSizeBound() int {
	return c.MaxKeyLen + c.MaxValueLen + 3*(len(c.fencePrefix())+fence.MaxScopeLen) + 2*epochWidth + 64
}

// admitted is the Result of a write admitted at revision rev, given the
// response to its data operation.
func (e *entry) admitted(rev int64, r *pb.ResponseOp) Result {
	if e.Kind == KindDelete {
		return Result{Revision: rev, Deleted: r.GetResponseDeleteRange().GetDeleted() > 0}
	}
	return Result{Revision: rev}
}

// singleResult reads the outcome of an admitted write in the single-write
// form from the Else responses of singleOps.
func (e *entry) singleResult(rev int64, rs []*pb.ResponseOp) Result {
	if e.Kind != KindCompareAndSwap {
		return e.admitted(rev, rs[1])
	}
	tr := rs[0].GetResponseTxn()
	if tr.GetSucceeded() {
		return Result{Revision: rev}
	}
	var actual int64
	if inner := tr.GetResponses(); len(inner) > 0 {
		actual = keyVersion(inner[0])
	}
	return Result{Err: e.versionError(actual)}
}

func (e *entry) versionError(actual int64) error {
	return &VersionError{Key: e.Key, Expected: e.Version, Actual: actual}
}

// keyVersion is the version of the key read by r, 0 if it does not exist.
func keyVersion(r *pb.ResponseOp) int64 {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].Version
	}
	return 0
}
