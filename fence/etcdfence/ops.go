package etcdfence

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// This file turns a Write into etcd operations and reads its outcome back
// from etcd's responses.

// prepared is a validated write with its etcd keys.
type prepared struct {
	w     Write
	full  string // data key with prefix
	floor string // floor key of the token's scope
}

func (s *Store) prepare(w Write) (prepared, error) {
	if err := s.usable(); err != nil {
		return prepared{}, err
	}
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
	return prepared{w: w, full: full, floor: s.FloorKey(w.Token.Scope)}, nil
}

// singleOps are the Else operations of the single-write form: record the
// epoch and write. A compare-and-swap
// nests its version check, so that a refused swap records nothing, as in a
// flat transaction.
func (p prepared) singleOps() []clientv3.Op {
	put := clientv3.OpPut(p.floor, encodeEpoch(p.w.Token.Epoch))
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
	return versionCmp(p.full, pb.Compare_EQUAL, p.w.Version)
}

// size estimates the bytes the write adds to a transaction request.
func (p prepared) size() int {
	return len(p.full) + len(p.w.Value) + 3*len(p.floor) + 2*epochWidth + 64
}

// writeSizeBound is the largest size of one write under c.
func (c Config) writeSizeBound() int {
	return c.MaxKeyLen + c.MaxValueLen + 3*(len(c.fencePrefix())+fence.MaxScopeLen) + 2*epochWidth + 64
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
