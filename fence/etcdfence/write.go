package etcdfence

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/fence"
)

// This file holds the vocabulary of writes: what a write is, what answers
// it, and the convenience methods Store and Batcher share.

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

// writeMethods gives a function that applies one Write the methods Put,
// Delete and CompareAndSwap. Store (one transaction per write) and Batcher
// (the write joins the next batch) embed it.
type writeMethods struct {
	do func(context.Context, Write) Result
}

// apply applies w with m.do, which is nil only in a Store or Batcher not
// made by New or NewBatcher.
func (m writeMethods) apply(ctx context.Context, w Write) Result {
	if m.do == nil {
		return Result{Err: fmt.Errorf("%w: Store or Batcher not created by New or NewBatcher", ErrNilArgument)}
	}
	return m.do(ctx, w)
}

// Put writes value at key under t. The check of t against its scope's
// floor, the recording of t.Epoch as the new floor and the write commit in
// one transaction (through a Batcher, the transaction of the write's
// batch). It returns the etcd revision of the write, or a
// *fence.StaleError if t is older than the floor.
func (m writeMethods) Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error) {
	r := m.apply(ctx, PutWrite(t, key, value))
	return r.Revision, r.Err
}

// Delete deletes key under t, fenced as Put is. It reports whether the key
// existed.
func (m writeMethods) Delete(ctx context.Context, t fence.Token, key string) (bool, error) {
	r := m.apply(ctx, DeleteWrite(t, key))
	return r.Deleted, r.Err
}

// CompareAndSwap writes value at key under t iff the key's version is
// version (0: the key must not exist), fenced as Put is. It returns the
// revision of the write, a *fence.StaleError if t is stale, or a
// *VersionError (errors.Is ErrVersionMismatch) if the version differs, in
// which case nothing is written and the token is not recorded.
func (m writeMethods) CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error) {
	r := m.apply(ctx, CompareAndSwapWrite(t, key, version, value))
	return r.Revision, r.Err
}
