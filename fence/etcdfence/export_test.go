package etcdfence

import "context"

// UnfenceForBench makes s's flat transactions check and record no floor:
// the baseline of group commit without the fence, for the benchmarks only.
// Advance s's scopes first, so that no write takes the single-write form.
func UnfenceForBench(s *Store) { s.unfenced = true }

// The defaults of Config that the tests check at their bounds.
const (
	DefaultMaxKeyLen   = defaultMaxKeyLen
	DefaultMaxValueLen = defaultMaxValueLen
)

// FloorKey returns the etcd key that holds scope's floor in s.
func FloorKey(s *Store, scope string) string { return s.floorKey(scope) }

// DataPrefix returns the prefix of s's data keys (its Config.Prefix).
func DataPrefix(s *Store) string { return s.cfg.Prefix }

// BatcherDo submits w to b and waits for its result, as b's Put, Delete
// and CompareAndSwap do.
func BatcherDo(ctx context.Context, b *Batcher, w Write) Result { return b.do(ctx, w) }
