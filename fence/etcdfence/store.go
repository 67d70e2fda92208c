package etcdfence

import (
	"context"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
)

// This file holds the Store and its operations on one key or one floor.
// A write goes Put (or Delete, CompareAndSwap) -> apply -> entry (write.go)
// -> commitChunk (commit.go), which commits it in the single-write form
// (single, then guarded below) or, once its floor is known, in a flat
// transaction (attempt).

// Store is a fenced key-value store over etcd. Every operation takes the
// token of its caller's tenure and is refused with a *fence.StaleError if
// the token's epoch is older than its scope's floor.
//
// A Store is safe for concurrent use. Its only state is the floors it has
// seen, kept as a hint (see the package documentation); any number of
// Stores, in any number of processes, over the same etcd and of the same
// fleet share the floors themselves. Create Stores with New.
type Store struct {
	kv       clientv3.KV
	cfg      Config
	fences   string // the fence prefix: cfg.fencePrefix()
	floors   floorCache
	metrics  *metrics.Fence // nil: no metrics
	ops      sync.Pool      // of *[]clientv3.Op: see attemptOps
	unfenced bool           // benchmarks' baseline only: attempts check and record no floor
}

// Item is a key's value and metadata as read by Get.
type Item struct {
	// Key is the key as the caller named it (without the store's prefix).
	Key string
	// Value is the key's value; nil if the key does not exist.
	Value []byte
	// Version counts the writes to the key since its creation; 0 means the
	// key does not exist. CompareAndSwap compares it.
	Version int64
	// CreateRevision and ModRevision are the etcd revisions of the key's
	// creation and last write; 0 if the key does not exist.
	CreateRevision, ModRevision int64
}

// Exists reports whether the key existed when it was read.
func (it Item) Exists() bool { return it.Version > 0 }

// New returns a Store that reaches etcd through kv (a *clientv3.Client
// will do). It validates cfg, applies its defaults and registers the
// metrics of cfg.Metrics; cfg is copied.
func New(kv clientv3.KV, cfg Config) (*Store, error) {
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd KV %T", ErrNilArgument, kv)
	}
	if c, ok := kv.(*clientv3.Client); ok && nilness.Is(c.KV) {
		return nil, fmt.Errorf("%w: *clientv3.Client without a KV (create clients with clientv3.New)", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	s := &Store{kv: kv, cfg: cfg.withDefaults(), fences: cfg.fencePrefix(), metrics: m}
	s.ops.New = func() any { return new([]clientv3.Op) }
	return s, nil
}

// usable returns ErrNilArgument for a Store not made by New (its zero
// value), on which any call to etcd would panic.
func (s *Store) usable() error {
	if s == nil || s.kv == nil {
		return fmt.Errorf("%w: Store not created by New", ErrNilArgument)
	}
	return nil
}

// FencePrefix returns where the Store's floors live: the fence prefix of
// its fleet's key layout, "<fleet prefix>fence/" ("/tenure/<Cluster>/fence/"
// by default). The floor of scope s is the key FencePrefix()+s. A node
// compares it with its own fleet's at Join.
func (s *Store) FencePrefix() string { return s.fences }

// floorKey returns the etcd key that holds scope's floor.
func (s *Store) floorKey(scope string) string { return s.fences + scope }

// dataKey validates key and returns it with the prefix.
func (s *Store) dataKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	full := s.cfg.Prefix + key
	if len(full) > s.cfg.MaxKeyLen {
		return "", fmt.Errorf("%w: key of %d bytes (with prefix) exceeds %d", ErrInvalidKey, len(full), s.cfg.MaxKeyLen)
	}
	if strings.HasPrefix(full, s.fences) {
		return "", fmt.Errorf("%w: key %q falls under the fence prefix %q", ErrInvalidKey, full, s.fences)
	}
	return full, nil
}

func (s *Store) checkValue(value []byte) error {
	if len(value) > s.cfg.MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrInvalidWrite, len(value), s.cfg.MaxValueLen)
	}
	return nil
}

// Get reads key under t. It is refused with a *fence.StaleError if t is
// older than its scope's floor. Get checks the token but does not record it
// (it does not raise the floor): recording would turn every read into a
// replicated write, and owners raise the floor with Advance before their
// first operation. The read is linearizable. A missing key yields an Item
// whose Exists reports false.
//
// Get, like the writes, refuses a token older than a floor this Store has
// already seen without asking etcd: floors never fall.
func (s *Store) Get(ctx context.Context, t fence.Token, key string) (Item, error) {
	if err := s.usable(); err != nil {
		return Item{}, err
	}
	if err := t.Validate(); err != nil {
		return Item{}, err
	}
	full, err := s.dataKey(key)
	if err != nil {
		return Item{}, err
	}
	if err := s.cachedStale(t); err != nil {
		return Item{}, err
	}
	resp, stale, err := s.guarded(ctx, t, s.floorKey(t.Scope), clientv3.OpGet(full))
	if err != nil {
		return Item{}, fmt.Errorf("etcdfence: get %q: %w", key, err)
	}
	if stale != nil {
		return Item{}, stale
	}
	s.metrics.Admitted(1)
	it := Item{Key: key}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		kv := kvs[0]
		it.Value, it.Version, it.CreateRevision, it.ModRevision = kv.Value, kv.Version, kv.CreateRevision, kv.ModRevision
	}
	return it, nil
}

// Put writes value at key under t. The check of t against its scope's
// floor, the recording of t.Epoch as the new floor and the write commit in
// one transaction. It returns the etcd revision of the write, or a
// *fence.StaleError if t is older than the floor.
func (s *Store) Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error) {
	r := s.apply(ctx, Write{Kind: KindPut, Token: t, Key: key, Value: value})
	return r.Revision, r.Err
}

// Delete deletes key under t, fenced as Put is. It reports whether the key
// existed.
func (s *Store) Delete(ctx context.Context, t fence.Token, key string) (bool, error) {
	r := s.apply(ctx, Write{Kind: KindDelete, Token: t, Key: key})
	return r.Deleted, r.Err
}

// CompareAndSwap writes value at key under t iff the key's version is
// version (0: the key must not exist), fenced as Put is. It returns the
// revision of the write, a *fence.StaleError if t is stale, or a
// *VersionError (errors.Is ErrVersionMismatch) if the version differs, in
// which case nothing is written and the token is not recorded.
func (s *Store) CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error) {
	r := s.apply(ctx, Write{Kind: KindCompareAndSwap, Token: t, Key: key, Version: version, Value: value})
	return r.Revision, r.Err
}

// apply commits w alone. Every outcome, a validation or etcd error
// included, is in the Result.
func (s *Store) apply(ctx context.Context, w Write) Result {
	e, err := s.entry(w, 0)
	if err != nil {
		return Result{Err: err}
	}
	return s.commitOne(ctx, e)
}

// commitOne commits the validated e, of index 0, alone.
func (s *Store) commitOne(ctx context.Context, e entry) Result {
	var results [1]Result
	_ = s.commitChunk(ctx, []entry{e}, results[:]) // failures are in results
	return results[0]
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
	floor := s.floorKey(t.Scope)
	_, stale, err := s.guarded(ctx, t, floor, clientv3.OpPut(floor, encodeEpoch(t.Epoch)))
	if err != nil {
		return fmt.Errorf("etcdfence: advance %s: %w", t, err)
	}
	if stale != nil {
		return stale
	}
	s.floors.raise(t.Scope, t.Epoch)
	s.metrics.Admitted(1)
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
	resp, err := s.kv.Get(ctx, s.floorKey(scope))
	if err != nil {
		return 0, fmt.Errorf("etcdfence: floor of %q: %w", scope, err)
	}
	return s.floorOf(scope, resp.Kvs)
}

// guarded runs the transaction of the single-write form
//
//	If(Value(floor) > t.Epoch) Then(Get(floor)) Else(els...)
//
// in which els runs iff t is not older than its scope's floor: the
// comparison fails on a missing floor, so the Else branch also covers a
// scope never written. A refusal is returned as stale (a
// *fence.StaleError); err is etcd's.
func (s *Store) guarded(ctx context.Context, t fence.Token, floor string, els ...clientv3.Op) (resp *clientv3.TxnResponse, stale, err error) {
	resp, err = s.kv.Txn(ctx).If(staleCmp(floor, t.Epoch)).Then(clientv3.OpGet(floor)).Else(els...).Commit()
	if err == nil && resp.Succeeded {
		stale = s.staleFrom(t, resp.Responses[0])
	}
	return resp, stale, err
}
