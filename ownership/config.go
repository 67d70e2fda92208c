package ownership

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/nilness"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
)

const (
	// DefaultDrainTimeout bounds how long a handoff waits for in-flight work
	// when Config.DrainTimeout is zero. Work that takes longer keeps running
	// after the claim is deleted, fenced off by the next owner's epoch.
	DefaultDrainTimeout = 5 * time.Second

	// DefaultMaxTxnOps is etcd's default limit of operations per transaction
	// (its --max-txn-ops flag), used when Config.MaxTxnOps is zero.
	DefaultMaxTxnOps = 128

	// maxAddrLen bounds Config.Addr.
	maxAddrLen = 1024
)

// Client is what a Node needs from etcd. A *clientv3.Client satisfies it; a
// simulator can supply an in-memory implementation. The Node never closes
// the Client.
type Client interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

// Config configures a Node. Start from DefaultConfig and set Cluster (or
// Prefix) and NodeID. Join copies the Config; later changes to the caller's
// value (its Meta map or Fencers slice included) have no effect.
type Config struct {
	// Cluster names the cluster. Its keys live under "/tenure/<Cluster>/"
	// unless Prefix is set. It must not contain '/' or NUL. One of Cluster
	// and Prefix is required.
	Cluster string
	// Prefix, if set, is the key prefix of the cluster instead of the one
	// derived from Cluster. A trailing '/' is added if missing.
	Prefix string
	// NodeID identifies this node; it must pass ValidateNodeID and be unique
	// among live nodes of the cluster.
	NodeID string
	// Addr is the address (host:port) at which other nodes reach this one,
	// published in its member key. It may be empty for a node that serves no
	// remote requests. At most 1024 bytes.
	Addr string
	// Meta is published with the member key for others to read (Members).
	Meta map[string]string
	// Ring sets the partition count and load factor. Every node of the
	// cluster must use the same values. DefaultConfig sets
	// DefaultRingConfig (1024 partitions, load factor 1.25); zero values are
	// invalid.
	Ring RingConfig
	// Session configures the node's lease. Its zero fields take the
	// defaults documented in election.SessionConfig; a nil Clock means
	// Config.Clock and a nil Logger means Config.Logger.
	Session election.SessionConfig
	// DrainTimeout bounds how long a handoff waits for the partition's
	// in-flight work (and its OnReleased callback) before the claim is
	// deleted. Zero means DefaultDrainTimeout (5s); negative is invalid.
	DrainTimeout time.Duration
	// MaxTxnOps is the etcd server's limit of operations per transaction.
	// Claims and releases are batched into transactions within this limit.
	// Zero means DefaultMaxTxnOps (128, etcd's default); otherwise it must be
	// at least 2.
	MaxTxnOps int
	// Logger receives the node's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Callbacks are told when partitions are acquired and released.
	Callbacks Callbacks
	// Fencers are advanced, in order, to every new epoch before work runs
	// under it. Nil entries are invalid.
	Fencers []fence.Fencer
	// Clock is the time source for timers and backoff, and for the Session
	// unless Session.Clock is set. Nil means clock.Real().
	Clock clock.Clock
	// Metrics, if not nil, receives the node's Prometheus metrics, under
	// the const label node=<NodeID> (so that several nodes can share one
	// registry), and those of its sessions unless Session.Metrics is set.
	// Join registers them and fails with an error wrapping ErrMetrics if it
	// cannot; they are unregistered when the node stops. See the package
	// documentation, "Operability".
	Metrics prometheus.Registerer
}

// DefaultConfig returns a Config with the documented defaults: 1024
// partitions, load factor 1.25, a 5s drain timeout, etcd's default
// transaction size, and a zero Session, which selects the session's defaults
// (TTL 10s renewed every TTL/3; setting only Session.TTL rescales the
// others). Cluster and NodeID are left for the caller to set.
func DefaultConfig() Config {
	return Config{
		Ring:         DefaultRingConfig(),
		Session:      election.SessionConfig{}, // zero fields: the session's defaults
		DrainTimeout: DefaultDrainTimeout,
		MaxTxnOps:    DefaultMaxTxnOps,
	}
}

// Validate reports whether c can configure a Node. Errors wrap
// ErrInvalidConfig; an invalid node ID, partition count or load factor also
// wraps ErrInvalidNodeID, ErrInvalidPartitions or ErrInvalidLoadFactor.
func (c Config) Validate() error {
	switch {
	case c.Cluster == "" && c.Prefix == "":
		return fmt.Errorf("%w: Cluster or Prefix must be set", ErrInvalidConfig)
	case strings.ContainsAny(c.Cluster, "/\x00"):
		return fmt.Errorf("%w: cluster %q must not contain '/' or NUL", ErrInvalidConfig, c.Cluster)
	case strings.ContainsRune(c.Prefix, 0):
		return fmt.Errorf("%w: prefix %q must not contain NUL", ErrInvalidConfig, c.Prefix)
	}
	if err := ValidateNodeID(c.NodeID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(c.Addr) > maxAddrLen {
		return fmt.Errorf("%w: address of %d bytes exceeds %d", ErrInvalidConfig, len(c.Addr), maxAddrLen)
	}
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Session.Validate(); err != nil {
		return fmt.Errorf("%w: session: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.DrainTimeout < 0:
		return fmt.Errorf("%w: drain timeout %v must not be negative", ErrInvalidConfig, c.DrainTimeout)
	case c.MaxTxnOps < 0 || c.MaxTxnOps == 1:
		return fmt.Errorf("%w: max txn ops %d must be 0 (default %d) or at least 2", ErrInvalidConfig, c.MaxTxnOps, DefaultMaxTxnOps)
	}
	for i, f := range c.Fencers {
		if nilness.Is(f) {
			return fmt.Errorf("%w: fencer %d is nil (%T)", ErrInvalidConfig, i, f)
		}
	}
	switch {
	case c.Logger != nil && nilness.Is(c.Logger):
		return fmt.Errorf("%w: logger is a nil %T", ErrInvalidConfig, c.Logger)
	case c.Clock != nil && nilness.Is(c.Clock):
		return fmt.Errorf("%w: clock is a nil %T", ErrInvalidConfig, c.Clock)
	case c.Metrics != nil && nilness.Is(c.Metrics):
		return fmt.Errorf("%w: metrics registerer is a nil %T", ErrInvalidConfig, c.Metrics)
	}
	return nil
}

// withDefaults returns a copy of c with every zero field that has a default
// filled in, and its reference fields (Meta, Fencers) copied.
func (c Config) withDefaults() Config {
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Session.Clock == nil {
		c.Session.Clock = c.Clock
	}
	if c.Session.Logger == nil {
		c.Session.Logger = c.Logger.With("node", c.NodeID).Named("session")
	}
	c.Meta = maps.Clone(c.Meta)
	c.Fencers = slices.Clone(c.Fencers)
	return c
}
