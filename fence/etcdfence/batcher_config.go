package etcdfence

import (
	"cmp"
	"fmt"
	"time"
)

// Defaults of BatcherConfig.
const (
	defaultMaxBatch      = 64
	defaultMaxInFlight   = 1
	defaultCommitTimeout = 10 * time.Second
)

// BatcherConfig tunes a Batcher. A zero field takes the default documented
// on it.
type BatcherConfig struct {
	// MaxBatch is the most writes gathered into one Commit (which may still
	// split them at the store's transaction limits), each coalesced write
	// counted. Zero means 64.
	MaxBatch int

	// Linger is how long a committer waits for more writes once it holds
	// at least one and fewer than MaxBatch are queued. Zero means it never
	// waits: a write that finds the Batcher idle commits at once, writes
	// that arrive during a commit form the next batch, so batches grow with
	// load and an idle store adds no delay. Above zero, every write waits
	// in a batch, even a lone one.
	Linger time.Duration

	// MaxInFlight is the most commits running at once, writes committed at
	// once included. Above 1, the next batch may start while one is in
	// flight, which helps when the round trip to etcd dominates; on a
	// CPU-bound etcd it only makes batches smaller. Zero means 1.
	MaxInFlight int

	// CommitTimeout bounds each commit. Zero means 10s.
	CommitTimeout time.Duration

	// NoCoalesce keeps every Put a write of its own in etcd: successive
	// Puts to one key then commit in successive transactions, and the
	// key's Version counts each of them. False (the default) lets the
	// Batcher coalesce them; see Batcher.
	NoCoalesce bool
}

// DefaultBatcherConfig returns the configuration with every default filled
// in.
func DefaultBatcherConfig() BatcherConfig { return BatcherConfig{}.withDefaults() }

// Validate reports whether c can configure a Batcher. The error wraps
// ErrInvalidConfig.
func (c BatcherConfig) Validate() error {
	if c.MaxBatch < 0 || c.MaxInFlight < 0 || c.Linger < 0 || c.CommitTimeout < 0 {
		return fmt.Errorf("%w: max batch %d, max in flight %d, linger %v and commit timeout %v must not be negative",
			ErrInvalidConfig, c.MaxBatch, c.MaxInFlight, c.Linger, c.CommitTimeout)
	}
	d := c.withDefaults()
	if d.Linger >= d.CommitTimeout {
		return fmt.Errorf("%w: linger %v must be < commit timeout %v", ErrInvalidConfig, d.Linger, d.CommitTimeout)
	}
	return nil
}

func (c BatcherConfig) withDefaults() BatcherConfig {
	c.MaxBatch = cmp.Or(c.MaxBatch, defaultMaxBatch)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, defaultMaxInFlight)
	c.CommitTimeout = cmp.Or(c.CommitTimeout, defaultCommitTimeout)
	return c
}

// BatcherStats counts a Batcher's work.
type BatcherStats struct {
	// Commits is the number of commits made (each one or more etcd
	// transactions), Alone included.
	Commits uint64
	// Writes is the number of writes those commits carried, coalesced ones
	// included.
	Writes uint64
	// Alone is the number of writes committed at once, on their caller's
	// goroutine, because nothing was there to batch them with.
	Alone uint64
	// Coalesced is the number of Puts that shared their write in etcd with
	// a later Put of the same key and token (see Batcher).
	Coalesced uint64
}
