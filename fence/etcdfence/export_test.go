package etcdfence

// UnfenceForBench makes s's flat transactions check and record no floor:
// the baseline of group commit without the fence, for the benchmarks only.
// Advance s's scopes first, so that no write takes the single-write form.
func UnfenceForBench(s *Store) { s.unfenced = true }

// The defaults of Config that the tests check at their bounds.
const (
	DefaultMaxKeyLen   = defaultMaxKeyLen
	DefaultMaxValueLen = defaultMaxValueLen
)
