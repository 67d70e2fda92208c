package ownership

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/errs"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/ring"
)

const (
	// defaultDrainTimeout bounds how long a handoff waits for in-flight work
	// when Config.DrainTimeout is zero. Work that takes longer has its
	// context cancelled when the timeout passes; if it runs on, it is fenced
	// off by the next owner's epoch.
	defaultDrainTimeout = 5 * time.Second

	// defaultWarmTimeout bounds how long a holder waits for its
	// successor's preparation when Config.WarmTimeout is zero: long enough
	// to load a partition's state from a database, short enough that a
	// successor that never gets ready delays a deploy by little.
	defaultWarmTimeout = 3 * time.Second

	// defaultAcquiredTimeout bounds how long a newly acquired partition
	// waits for its OnAcquired before it admits work when
	// Config.AcquiredTimeout is zero. Callbacks run one at a time, so it
	// must cover the callbacks of a whole batch of partitions acquired
	// together (after Join, or a failover) that each load some state from
	// a database; past it, a hung callback costs its partition no more
	// than a bounded outage.
	defaultAcquiredTimeout = 10 * time.Second

	// defaultMaxTxnOps is etcd's default limit of operations per transaction
	// (its --max-txn-ops flag), used when Config.MaxTxnOps is zero.
	defaultMaxTxnOps = 128

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
	// NodeID identifies this node; it must pass ring.ValidateNodeID and be unique
	// among live nodes of the cluster.
	NodeID string
	// Addr is the address (host:port) at which other nodes reach this one,
	// published in its member key. It may be empty for a node that serves no
	// remote requests. At most 1024 bytes.
	Addr string
	// Meta is published with the member key for others to read (Members).
	Meta map[string]string
	// Weight is the node's capacity weight, published with its member key:
	// under ring.AlgorithmWeighted (a new fleet's algorithm) a node's share
	// of partitions (and the balancer's target of its load) is
	// proportional to it. Zero means 1; it must be at most ring.MaxWeight.
	// A fleet of ring.AlgorithmBounded gives every node weight 1, so Join
	// refuses a weight other than 1 there (ErrWeightUnsupported).
	Weight int
	// Ring sets the partition count, the load factor and the ring
	// algorithm. Every node of the cluster must use the same values: the
	// first node to join stores them as the fleet's ring.Spec, and Join
	// refuses a node whose Ring differs from it (*ring.SpecMismatchError),
	// unless AdoptSpec is set. An unset (zero) Ring.Algorithm is the
	// fleet's: the node adopts the algorithm the spec records, and the
	// first node of a fleet records ring.AlgorithmWeighted. DefaultConfig
	// sets ring.DefaultConfig (1024 partitions, load factor 1.25, the
	// algorithm unset); zero partitions or load factor are invalid.
	Ring ring.Config

	// features, if not nil, replaces the protocol features this build
	// publishes and understands (fleetview.Features): tests set it to
	// play a build of an older feature level.
	features []string
	// AdoptSpec makes Join use the fleet's Spec (its partition count, load
	// factor and ring algorithm) in place of Ring when the fleet has one, instead of
	// refusing a Ring that differs from it; Ring is then only the spec the
	// node creates if the fleet has none yet. Creating the spec and reading
	// the one that exists are one transaction, so nodes that join an empty
	// fleet together all end up with the one spec that was stored, whatever
	// the order. Node.Ring tells which spec the node uses. A stored spec
	// that this build cannot compute (another ring algorithm) is refused
	// with an error wrapping ring.ErrInvalidSpec either way. Set it in services
	// whose copies all start alike, so that none has to know whether it is
	// the first.
	AdoptSpec bool
	// Session configures the node's lease. Its zero fields take the
	// defaults documented in election.SessionConfig; a nil Clock means
	// Config.Clock and a nil Logger means Config.Logger.
	Session election.SessionConfig
	// LoadInterval is how often the node folds the work it admitted into
	// its smoothed load per partition and may publish its load report
	// (<prefix>load/<nodeID>, bound to its lease) for the balancer and the
	// operator; a report is written at most every
	// max(LoadInterval, members/LoadBudget), and only when it changed.
	// Zero means 10s; negative turns load reports off.
	LoadInterval time.Duration
	// LoadWindow is the smoothing window (time constant) of the load per
	// partition. Zero means 1 minute; negative is invalid.
	LoadWindow time.Duration
	// LoadBudget is the most load reports per second the whole fleet
	// should write: each node stretches its report interval to
	// members/LoadBudget. Zero means 5; negative is invalid.
	LoadBudget float64
	// DrainTimeout bounds how long a handoff waits for the partition's
	// in-flight work, whose context stays live meanwhile, and then for its
	// OnReleased callback, before the claim is deleted. When it passes with
	// work still in flight, that work's context is cancelled and the handoff
	// goes on. Zero means 5s; negative is invalid.
	DrainTimeout time.Duration
	// WarmTimeout bounds the prepare phase of a planned move (the warm
	// handoff): when the ring moves partitions away, their holder keeps
	// serving them until their next owners have prepared every one of
	// them (Callbacks.OnPrepare returned and its readiness reached etcd)
	// or WarmTimeout has passed since the move began, whichever comes
	// first, and only then drains and releases them, together, as
	// DrainTimeout says. A successor that never gets ready delays the
	// move by at most WarmTimeout (by AcquiredTimeout more if the ring
	// moved a partition while this node was still starting it: it waits
	// for the successor's readiness too, admitting no work, and serves
	// once it would have), and the partitions not prepared then go on
	// cold. Zero means 3s; negative turns the prepare phase off: the
	// holder releases at once and this node prepares nothing. A node
	// prepares only with an OnPrepare and the phase on, and says so in its
	// member value: a holder waits only for a successor that says it
	// prepares, so a fleet of nodes without OnPrepare (or of builds without
	// the phase) hands off at once, as without the phase.
	WarmTimeout time.Duration
	// AcquiredTimeout bounds the starting phase of a tenure: once the
	// node has claimed a partition and advanced its Fencers, it calls
	// Callbacks.OnAcquired and admits no work for the partition (Hold
	// answers a *WrongOwnerError with Acquiring set, which the router and
	// grpcroute wait out as a handoff) until OnAcquired has returned or
	// AcquiredTimeout has passed since it was queued, whichever comes
	// first; a partition admitted because the timeout passed is logged
	// (Warn) and counted (tenure_partition_acquired_timeouts_total).
	// State that OnAcquired loads is thus in place before the first call.
	// Zero means 10s; negative turns the phase off: work is admitted as
	// soon as the fencers have been advanced, and OnAcquired runs
	// concurrently with it (it is called once Lookup reports the
	// partition Local), so a node that loads state in OnAcquired must then
	// let the first calls wait for it. A node without OnAcquired has no
	// starting phase. See the order of events in the package
	// documentation.
	AcquiredTimeout time.Duration
	// MaxTxnOps is the etcd server's limit of operations per transaction.
	// Claims and releases are batched into transactions within this limit.
	// Zero means 128, etcd's default; otherwise it must be
	// at least 2.
	MaxTxnOps int
	// Logger receives the node's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Callbacks are told when partitions are acquired and released.
	Callbacks Callbacks
	// Fencers are advanced, in order, to every new epoch before work runs
	// under it. A fencer that also has the method
	//
	//	AdvanceAll(ctx context.Context, ts []fence.Token) error
	//
	// (such as sqlfence.Fencer) is called once with the tokens of all the
	// partitions acquired together, instead of Advance per partition; an
	// error of it that wraps *fence.StaleErrors fails only the partitions
	// of those tokens, and any other error all of them. Nil entries are
	// invalid, and so is a fencer that keeps its floors in etcd under
	// another fleet's prefix: one with a method FencePrefix() string (an
	// etcdfence.Store) that does not return this fleet's
	// "<prefix>fence/" (ErrForeignFencer).
	Fencers []fence.Fencer
	// Signer, if not nil, signs the token of every tenure this node
	// starts; the signature travels with the token in the partition's
	// context (fence.SignatureFromContext), httpfence.Transport sends it,
	// and downstream services verify it with the public key alone
	// (fence.SignatureVerifier). Every node of the fleet should sign with
	// a key the services hold. Nil means tokens go unsigned.
	Signer *fence.Signer
	// Clock is the time source for timers and backoff, and for the Session
	// unless Session.Clock is set. Nil means the real clock.
	Clock clockwork.Clock
	// Metrics, if not nil, receives the node's Prometheus metrics, under
	// the const label node=<NodeID> (so that several nodes can share one
	// registry), and those of its sessions unless Session.Metrics is set.
	// Join registers them and fails with an error wrapping ErrMetrics if it
	// cannot; they are unregistered when the node stops. See the package
	// documentation, "Operability".
	Metrics prometheus.Registerer
	// TracerProvider, if not nil, receives OpenTelemetry spans for every
	// phase of the node's planned moves, on both sides (prepare, drain,
	// release, hand-over; claim, fence raise, OnAcquired, the start of
	// admission), and of its failovers. Nil means no spans (never the
	// global provider). The spans and their attributes are listed beside
	// the code that opens them (trace.go) and in README.md's "Tracing".
	TracerProvider trace.TracerProvider
}

// DefaultConfig returns a Config with the documented defaults: 1024
// partitions, load factor 1.25, the ring algorithm unset (the fleet's;
// ring.AlgorithmWeighted for a new fleet), a 5s drain timeout, a 3s warm
// timeout, a 10s acquired timeout, etcd's default
// transaction size, and a zero Session, which selects the session's defaults
// (TTL 10s renewed every TTL/3; setting only Session.TTL rescales the
// others). Cluster and NodeID are left for the caller to set.
func DefaultConfig() Config {
	return Config{
		Ring:         ring.DefaultConfig(),
		Session:      election.SessionConfig{}, // zero fields: the session's defaults
		DrainTimeout: defaultDrainTimeout,
		WarmTimeout:  defaultWarmTimeout,
		MaxTxnOps:    defaultMaxTxnOps,

		AcquiredTimeout: defaultAcquiredTimeout,
	}
}

// Validate reports whether c can configure a Node. Errors wrap
// ErrInvalidConfig and say each package's prefix once ("ownership: invalid
// config: session: TTL 1s must be at least 2s"); an invalid node ID,
// partition count, load factor or session also wraps ring.ErrInvalidNodeID,
// ErrInvalidPartitions, ErrInvalidLoadFactor or the election package's
// error; a weight other than 1 with Ring.Algorithm set to
// ring.AlgorithmBounded also wraps ErrWeightUnsupported. An interface-typed
// field (a Fencer, Logger, Clock, Session.Clock or Session.Logger) that
// holds a nil pointer is refused, not left to panic later.
func (c Config) Validate() error {
	if err := keys.CheckFleet(c.Cluster, c.Prefix); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := ring.ValidateNodeID(c.NodeID); err != nil {
		return errs.Nest(ErrInvalidConfig, "node ID", err)
	}
	if len(c.Addr) > maxAddrLen {
		return fmt.Errorf("%w: address of %d bytes exceeds %d", ErrInvalidConfig, len(c.Addr), maxAddrLen)
	}
	if err := c.Ring.Validate(); err != nil {
		return errs.Nest(ErrInvalidConfig, "ring", err)
	}
	if c.Weight < 0 || c.Weight > ring.MaxWeight {
		return errs.Nest(ErrInvalidConfig, "weight", fmt.Errorf("%w: %d must be in [0, %d]", ring.ErrInvalidWeight, c.Weight, ring.MaxWeight))
	}
	if err := c.checkWeight(c.Ring.Algorithm, "Ring.Algorithm asserts"); err != nil {
		return errs.Nest(ErrInvalidConfig, "weight", err)
	}
	if err := c.Session.Validate(); err != nil {
		return errs.Nest(ErrInvalidConfig, "session", err)
	}
	switch {
	case c.LoadWindow < 0 || c.LoadBudget < 0 || math.IsNaN(c.LoadBudget) || math.IsInf(c.LoadBudget, 0):
		return fmt.Errorf("%w: load window %v and load budget %v must not be negative", ErrInvalidConfig, c.LoadWindow, c.LoadBudget)
	case c.DrainTimeout < 0:
		return fmt.Errorf("%w: drain timeout %v must not be negative", ErrInvalidConfig, c.DrainTimeout)
	case c.MaxTxnOps < 0 || c.MaxTxnOps == 1:
		return fmt.Errorf("%w: max txn ops %d must be 0 (default %d) or at least 2", ErrInvalidConfig, c.MaxTxnOps, defaultMaxTxnOps)
	}
	fences := keys.For(c.Cluster, c.Prefix).Fences()
	for i, f := range c.Fencers {
		if nilness.Is(f) {
			return fmt.Errorf("%w: fencer %d is nil (%T)", ErrInvalidConfig, i, f)
		}
		if err := keys.CheckFencer(f, fences); err != nil {
			return errs.Nest(ErrInvalidConfig, fmt.Sprintf("fencer %d", i), fmt.Errorf("%w: %w", ErrForeignFencer, err))
		}
	}
	if err := nilness.TypedNil(nilness.Field{Name: "logger", Value: c.Logger}, nilness.Field{Name: "clock", Value: c.Clock}, nilness.Field{Name: "metrics registerer", Value: c.Metrics}, nilness.Field{Name: "tracer provider", Value: c.TracerProvider}); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// checkWeight returns an error wrapping ErrWeightUnsupported if c gives the
// node a weight other than 1 and alg is ring.AlgorithmBounded, which would
// ignore it; source says where alg comes from ("the fleet /tenure/x/
// records", "Ring.Algorithm asserts").
func (c Config) checkWeight(alg ring.Algorithm, source string) error {
	if alg != ring.AlgorithmBounded || c.Weight <= 1 {
		return nil
	}
	return fmt.Errorf("%w: node %s has weight %d, and %s the %v (count-only) ring algorithm, which gives every node weight 1; "+
		"weights take effect in a fleet of the %v algorithm: start a new fleet (another cluster name or prefix; a new fleet records %v), "+
		"or migrate this one to %v (tenurectl spec algorithm %v; fleet.Operator.MigrateAlgorithm) and join it then; or leave Weight at 1",
		ErrWeightUnsupported, c.NodeID, c.Weight, source, ring.AlgorithmBounded, ring.AlgorithmWeighted, ring.AlgorithmWeighted, ring.AlgorithmWeighted, ring.AlgorithmWeighted)
}

// buildFeatures returns the protocol features the node publishes and
// understands.
func (c Config) buildFeatures() []string {
	if c.features != nil {
		return c.features
	}
	return fleetview.Features()
}

// withDefaults returns a copy of c with every zero field that has a default
// filled in, and its reference fields (Meta, Fencers) copied.
func (c Config) withDefaults() Config {
	if c.DrainTimeout == 0 {
		c.DrainTimeout = defaultDrainTimeout
	}
	if c.LoadInterval == 0 {
		c.LoadInterval = defaultLoadInterval
	}
	if c.LoadWindow == 0 {
		c.LoadWindow = defaultLoadWindow
	}
	if c.LoadBudget == 0 {
		c.LoadBudget = defaultLoadBudget
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = defaultMaxTxnOps
	}
	if c.WarmTimeout == 0 {
		c.WarmTimeout = defaultWarmTimeout
	}
	if c.AcquiredTimeout == 0 {
		c.AcquiredTimeout = defaultAcquiredTimeout
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
