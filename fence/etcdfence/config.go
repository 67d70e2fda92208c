package etcdfence

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Defaults of Config. The limits stay below etcd's own defaults: a request
// of at most 1.5 MiB (--max-request-bytes) and at most 128 operations per
// transaction (--max-txn-ops).
const (
	defaultMaxKeyLen   = 4 << 10
	defaultMaxValueLen = 1 << 20
	defaultMaxTxnOps   = 128
	defaultMaxTxnBytes = 5 << 18 // 1.25 MiB
)

// Config tunes a Store. Cluster (or ClusterPrefix) is required: it names
// the fleet whose floors the Store keeps. Any other zero field takes the
// default documented on it.
type Config struct {
	// Cluster names the fleet, as ownership.Config.Cluster (and
	// election's ElectionConfig.Cluster) does: set it to the same value.
	// The floors live under the fleet's key prefix, "/tenure/<Cluster>/",
	// unless ClusterPrefix is set, at "<prefix>fence/" (see
	// Store.FencePrefix). It must not contain '/' or NUL. One of Cluster
	// and ClusterPrefix is required: there is no default fleet, since two
	// fleets that shared floors would fence out each other's owners.
	Cluster string

	// ClusterPrefix, if set, is the fleet's key prefix instead of the one
	// derived from Cluster, as ownership.Config.Prefix: set it to the same
	// value. A trailing '/' is added if missing.
	ClusterPrefix string

	// Prefix is prepended to every data key. Empty means keys are used as
	// given. Data keys may not fall under the fence prefix.
	Prefix string

	// MaxKeyLen bounds the length in bytes of a data key including Prefix.
	// Zero means 4 KiB.
	MaxKeyLen int

	// MaxValueLen bounds the length in bytes of a value. Zero means 1 MiB.
	MaxValueLen int

	// MaxTxnOps is the most operations Commit puts in one transaction,
	// counted as the etcd server counts them. It must not exceed the
	// server's --max-txn-ops. Zero means 128, etcd's default.
	MaxTxnOps int

	// MaxTxnBytes bounds the estimated size of one transaction built by
	// Commit. It must stay below the server's --max-request-bytes. Zero
	// means 1.25 MiB.
	MaxTxnBytes int

	// Metrics, if not nil, receives the counts of the tokens the Store
	// admits and refuses, tenure_fence_admitted_total and
	// tenure_fence_rejections_total with the const label store="etcd" (see
	// metrics.go). New registers them and fails with an error wrapping
	// ErrMetrics if it cannot. Stores given one registry share the two
	// metrics, which stay registered. Nil means no metrics.
	Metrics prometheus.Registerer
}

// fencePrefix is where the floors of c's fleet live.
func (c Config) fencePrefix() string { return keys.For(c.Cluster, c.ClusterPrefix).Fences() }

// DefaultConfig returns the configuration with every default filled in.
// It names no fleet: set Cluster (or ClusterPrefix) before use.
func DefaultConfig() Config { return Config{}.withDefaults() }

// minTxnOps is the smallest MaxTxnOps with room for one write and its
// scope's floor, a compare-and-swap in the single-write form (whose nested
// transaction counts too) included.
const minTxnOps = 3

// Validate reports whether c, with defaults applied to its zero fields, can
// configure a Store. The error wraps ErrInvalidConfig; for a Config that
// names no fleet, it is ErrNoFleet.
func (c Config) Validate() error {
	switch err := keys.CheckFleet(c.Cluster, c.ClusterPrefix); {
	case errors.Is(err, keys.ErrNoCluster):
		return ErrNoFleet
	case err != nil:
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
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
	if fp := d.fencePrefix(); strings.HasPrefix(d.Prefix, fp) {
		return fmt.Errorf("%w: prefix %q lies inside fence prefix %q", ErrInvalidConfig, d.Prefix, fp)
	}
	if c.Metrics != nil && nilness.Is(c.Metrics) {
		return fmt.Errorf("%w: metrics registerer %T", ErrNilArgument, c.Metrics)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.MaxKeyLen = cmp.Or(c.MaxKeyLen, defaultMaxKeyLen)
	c.MaxValueLen = cmp.Or(c.MaxValueLen, defaultMaxValueLen)
	c.MaxTxnOps = cmp.Or(c.MaxTxnOps, defaultMaxTxnOps)
	c.MaxTxnBytes = cmp.Or(c.MaxTxnBytes, defaultMaxTxnBytes)
	return c
}
