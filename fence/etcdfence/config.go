package etcdfence

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/tenure-go/tenure/internal/keys"
)

// Defaults of Config. The limits stay below etcd's own defaults: a request
// of at most 1.5 MiB (--max-request-bytes) and at most 128 operations per
// transaction (--max-txn-ops).
const (
	DefaultMaxKeyLen   = 4 << 10
	DefaultMaxValueLen = 1 << 20
	DefaultMaxTxnOps   = 128
	DefaultMaxTxnBytes = 5 << 18 // 1.25 MiB
)

// Config tunes a Store. A zero field takes the default documented on it.
type Config struct {
	// Prefix is prepended to every data key. Empty means keys are used as
	// given.
	Prefix string

	// FencePrefix is where the floors live: the floor of scope s is the key
	// FencePrefix+s. It must match the FencePrefix of every other Store and
	// fencer of the same fleet. Empty means FencePrefixFor("default"),
	// "/tenure/default/fence/". Data keys may not fall under it.
	FencePrefix string

	// MaxKeyLen bounds the length in bytes of a data key including Prefix.
	// Zero means DefaultMaxKeyLen (4 KiB).
	MaxKeyLen int

	// MaxValueLen bounds the length in bytes of a value. Zero means
	// DefaultMaxValueLen (1 MiB).
	MaxValueLen int

	// MaxTxnOps is the most operations Commit puts in one transaction,
	// counted as the etcd server counts them. It must not exceed the
	// server's --max-txn-ops. Zero means DefaultMaxTxnOps (128, etcd's
	// default).
	MaxTxnOps int

	// MaxTxnBytes bounds the estimated size of one transaction built by
	// Commit. It must stay below the server's --max-request-bytes. Zero
	// means DefaultMaxTxnBytes (1.25 MiB).
	MaxTxnBytes int

	// Metrics, if not nil, counts the tokens the Store admits and refuses
	// (see Metrics); several Stores may share one. Nil means no metrics.
	Metrics *Metrics
}

// FencePrefixFor returns the fence prefix of the named cluster in tenure's
// key layout, "/tenure/<cluster>/fence/".
func FencePrefixFor(cluster string) string { return keys.New(cluster).Fences() }

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

// minTxnOps is the smallest MaxTxnOps with room for one write, its scope's
// floor and the floor generation, a compare-and-swap in the single-write
// form (whose nested transaction counts too) included.
const minTxnOps = 4

// Validate reports whether c, with defaults applied to its zero fields, can
// configure a Store. The error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	if c.MaxKeyLen < 0 || c.MaxValueLen < 0 || c.MaxTxnOps < 0 || c.MaxTxnBytes < 0 {
		return fmt.Errorf("%w: limits must not be negative (max key %d, max value %d, max txn ops %d, max txn bytes %d)",
			ErrInvalidConfig, c.MaxKeyLen, c.MaxValueLen, c.MaxTxnOps, c.MaxTxnBytes)
	}
	d := c.withDefaults()
	if d.MaxTxnOps < minTxnOps {
		return fmt.Errorf("%w: max txn ops %d must be at least %d", ErrInvalidConfig, d.MaxTxnOps, minTxnOps)
	}
	if d.MaxKeyLen <= len(d.Prefix) {
		return fmt.Errorf("%w: max key length %d leaves no room after prefix %q", ErrInvalidConfig, d.MaxKeyLen, d.Prefix)
	}
	if need := d.writeSizeBound(); need > d.MaxTxnBytes {
		return fmt.Errorf("%w: max txn bytes %d must hold one write of max key length %d and max value length %d (%d bytes)",
			ErrInvalidConfig, d.MaxTxnBytes, d.MaxKeyLen, d.MaxValueLen, need)
	}
	if strings.HasPrefix(d.Prefix, d.FencePrefix) {
		return fmt.Errorf("%w: prefix %q lies inside fence prefix %q", ErrInvalidConfig, d.Prefix, d.FencePrefix)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.FencePrefix = cmp.Or(c.FencePrefix, FencePrefixFor("default"))
	c.MaxKeyLen = cmp.Or(c.MaxKeyLen, DefaultMaxKeyLen)
	c.MaxValueLen = cmp.Or(c.MaxValueLen, DefaultMaxValueLen)
	c.MaxTxnOps = cmp.Or(c.MaxTxnOps, DefaultMaxTxnOps)
	c.MaxTxnBytes = cmp.Or(c.MaxTxnBytes, DefaultMaxTxnBytes)
	return c
}
