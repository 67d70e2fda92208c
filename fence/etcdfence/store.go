package etcdfence

import (
	"context"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Store is a fenced key-value store over etcd. Every operation takes the
// token of its caller's tenure and is refused with a *fence.StaleError if
// the token's epoch is older than its scope's floor.
//
// A Store is safe for concurrent use. Its only state is the floors it has
// seen, kept as a hint (see the package documentation); any number of
// Stores, in any number of processes, over the same etcd and of the same
// fleet share the floors themselves. Create Stores with New.
type Store struct {
	writeMethods // Put, Delete, CompareAndSwap: one transaction each
	kv           clientv3.KV
	cfg          Config
	fences       string // the fence prefix: cfg.fencePrefix()
	cache        floorCache
	ops          sync.Pool // of *[]clientv3.Op: see attemptOps
	unfenced     bool      // benchmarks' baseline only: attempts check and record no floor
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
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd KV %T", ErrNilArgument, kv)
	}
	if c, ok := kv.(*clientv3.Client); ok && nilness.Is(c.KV) {
		return nil, fmt.Errorf("%w: *clientv3.Client without a KV (create clients with clientv3.New)", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{kv: kv, cfg: cfg.withDefaults(), fences: cfg.fencePrefix()}
	s.ops.New = func() any { return new([]clientv3.Op) }
	s.writeMethods = writeMethods{do: s.write}
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

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// FencePrefix returns where the Store's floors live: the fence prefix of
// its fleet's key layout, "<fleet prefix>fence/" ("/tenure/<Cluster>/fence/"
// by default). The floor of scope s is the key FencePrefix()+s. A node
// compares it with its own fleet's at Join.
func (s *Store) FencePrefix() string { return s.fences }

// dataKey validates key and returns it with the prefix.
func (s *Store) dataKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	full := s.cfg.Prefix + key
	if len(full) > s.cfg.MaxKeyLen {
		return "", fmt.Errorf("%w: key of %d bytes (with prefix) exceeds %d", ErrKeyTooLong, len(full), s.cfg.MaxKeyLen)
	}
	if strings.HasPrefix(full, s.fences) {
		return "", fmt.Errorf("%w: key %q falls under the fence prefix %q", ErrInvalidKey, full, s.fences)
	}
	return full, nil
}

func (s *Store) checkValue(value []byte) error {
	if len(value) > s.cfg.MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrValueTooLarge, len(value), s.cfg.MaxValueLen)
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
	resp, stale, err := s.guarded(ctx, t, s.FloorKey(t.Scope), encodeEpoch(t.Epoch), clientv3.OpGet(full))
	if err != nil {
		return Item{}, fmt.Errorf("etcdfence: get %q: %w", key, err)
	}
	if stale != nil {
		return Item{}, stale
	}
	s.cfg.Metrics.Admitted(1)
	it := Item{Key: key}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		kv := kvs[0]
		it.Value, it.Version, it.CreateRevision, it.ModRevision = kv.Value, kv.Version, kv.CreateRevision, kv.ModRevision
	}
	return it, nil
}

// write runs one write through Commit's machinery. Every outcome, a
// validation or etcd error included, is in the Result.
func (s *Store) write(ctx context.Context, w Write) Result {
	p, err := s.prepare(w)
	if err != nil {
		return Result{Err: err}
	}
	return s.writePrepared(ctx, p)
}

// writePrepared commits one prepared write alone.
func (s *Store) writePrepared(ctx context.Context, p prepared) Result {
	var results [1]Result
	_ = s.commitChunk(ctx, []item{{idx: 0, p: p}}, results[:]) // failures are in results
	return results[0]
}
