package etcdfence

import (
	"context"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// Store is a fenced key-value store over etcd. Every operation takes the
// token of its caller's tenure and is refused with a *fence.StaleError if
// the token's epoch is older than its scope's floor.
//
// A Store is safe for concurrent use. Its only state is the floors it has
// seen, kept as a hint (see the package documentation); any number of
// Stores, in any number of processes, over the same etcd and FencePrefix
// share the floors themselves. Create Stores with New.
type Store struct {
	kv    clientv3.KV
	cfg   Config
	cache floorCache
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
// will do). It validates cfg and applies its defaults; cfg is copied.
func New(kv clientv3.KV, cfg Config) (*Store, error) {
	if kv == nil {
		return nil, fmt.Errorf("%w: nil etcd KV", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{kv: kv, cfg: cfg.withDefaults()}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// FloorKey returns the etcd key that holds scope's floor.
func (s *Store) FloorKey(scope string) string { return s.cfg.FencePrefix + scope }

// dataKey validates key and returns it with the prefix.
func (s *Store) dataKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	full := s.cfg.Prefix + key
	if len(full) > s.cfg.MaxKeyLen {
		return "", fmt.Errorf("%w: key of %d bytes (with prefix) exceeds %d", ErrKeyTooLong, len(full), s.cfg.MaxKeyLen)
	}
	if strings.HasPrefix(full, s.cfg.FencePrefix) {
		return "", fmt.Errorf("%w: key %q falls under the fence prefix %q", ErrInvalidKey, full, s.cfg.FencePrefix)
	}
	return full, nil
}

func (s *Store) checkValue(value []byte) error {
	if len(value) > s.cfg.MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrValueTooLarge, len(value), s.cfg.MaxValueLen)
	}
	return nil
}

// staleCmp is the comparison that holds iff t is older than its scope's
// floor. It fails on a missing floor, so the Else branch, which admits,
// also covers a scope never written.
func staleCmp(floorKey, epoch string) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(floorKey), ">", epoch)
}

// staleFrom builds the error for t from the floor read in a refused txn.
func (s *Store) staleFrom(t fence.Token, r *pb.ResponseOp) error {
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
	if c, ok := s.cache.get(t.Scope); ok && t.Epoch < c {
		return fence.NewStaleError(t, c)
	}
	return nil
}

// guarded runs the transaction
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

// Advance raises the floor of t's scope to t.Epoch, as a new owner does
// before its first write, so that older tokens are refused from then on
// even for keys the new owner never writes. It returns a *fence.StaleError
// if the floor is already newer than t; advancing to the current floor
// succeeds. Advance always asks etcd.
func (s *Store) Advance(ctx context.Context, t fence.Token) error {
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
	return nil
}

// Admit is Advance under the name of the fencing rule, so that a Store can
// stand wherever an admitter of tokens is expected (such as an HTTP
// middleware).
func (s *Store) Admit(ctx context.Context, t fence.Token) error { return s.Advance(ctx, t) }

// Floor returns the highest epoch admitted for scope, or 0 if none.
func (s *Store) Floor(ctx context.Context, scope string) (int64, error) {
	if err := fence.ValidateScope(scope); err != nil {
		return 0, err
	}
	resp, err := s.kv.Get(ctx, s.FloorKey(scope))
	if err != nil {
		return 0, fmt.Errorf("etcdfence: floor of %q: %w", scope, err)
	}
	return s.floorOf(scope, resp.Kvs)
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
	resp, stale, err := s.guarded(ctx, t, s.FloorKey(t.Scope), encodeEpoch(t.Epoch), clientv3.OpGet(full))
	if err != nil {
		return Item{}, fmt.Errorf("etcdfence: get %q: %w", key, err)
	}
	if stale != nil {
		return Item{}, stale
	}
	it := Item{Key: key}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		kv := kvs[0]
		it.Value, it.Version, it.CreateRevision, it.ModRevision = kv.Value, kv.Version, kv.CreateRevision, kv.ModRevision
	}
	return it, nil
}

// Put writes value at key under t, in one transaction with the check of t
// against its scope's floor and the recording of t.Epoch as the new floor.
// It returns the etcd revision of the write, or a *fence.StaleError if t is
// older than the floor.
func (s *Store) Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error) {
	r := s.write(ctx, PutWrite(t, key, value))
	return r.Revision, r.Err
}

// Delete deletes key under t, fenced as Put is. It reports whether the key
// existed.
func (s *Store) Delete(ctx context.Context, t fence.Token, key string) (bool, error) {
	r := s.write(ctx, DeleteWrite(t, key))
	return r.Deleted, r.Err
}

// CompareAndSwap writes value at key under t iff the key's version is
// version (0: the key must not exist), fenced as Put is. It returns the
// revision of the write, a *fence.StaleError if t is stale, or a
// *VersionError (errors.Is ErrVersionMismatch) if the version differs, in
// which case nothing is written and the token is not recorded.
func (s *Store) CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error) {
	r := s.write(ctx, CompareAndSwapWrite(t, key, version, value))
	return r.Revision, r.Err
}

// write runs one write through Commit's machinery. Every outcome, a
// validation or etcd error included, is in the Result.
func (s *Store) write(ctx context.Context, w Write) Result {
	p, err := s.prepare(w)
	if err != nil {
		return Result{Err: err}
	}
	results := make([]Result, 1)
	_ = s.commitChunk(ctx, []item{{idx: 0, p: p}}, results) // failures are in results
	return results[0]
}
