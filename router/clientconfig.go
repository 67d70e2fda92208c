package router

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// ClientConfig configures a Client. The zero value of each field selects its
// documented default; Cluster (or Prefix) is required.
type ClientConfig struct {
	// Cluster selects the key prefix "/tenure/<Cluster>/" of the fleet.
	// Either Cluster or Prefix must be set. Cluster must not contain '/'
	// or NUL, as ownership.Config.Cluster.
	Cluster string
	// Prefix, if set, is used instead of the prefix derived from Cluster.
	// It must not contain NUL.
	Prefix string
	// Partitions, if set, asserts the fleet's partition count: NewClient
	// reads the count from the fleet's spec in etcd and fails with an
	// *ring.SpecMismatchError (errors.Is ring.ErrSpecMismatch) if it
	// differs. Zero (the usual) takes the spec's.
	Partitions int
	// LoadFactor, if set, asserts the fleet's ring load factor as
	// Partitions does. Zero takes the spec's.
	LoadFactor float64
	// Algorithm, if set, asserts the fleet's ring algorithm as Partitions
	// does. Zero (the usual) takes the spec's.
	Algorithm ring.Algorithm
	// Scheme is the URL scheme of requests to the nodes. Empty means "http".
	Scheme string
	// HTTPClient sends the requests. Nil means a client with a pooled
	// transport (256 idle connections per node) whose
	// idle connections Close closes. Its Timeout, if any, applies to each
	// attempt as well as AttemptTimeout.
	HTTPClient *http.Client
	// SessionTTL is the lease TTL of the fleet's nodes (their
	// ownership.Config.Session.TTL), from which AttemptTimeout's default is
	// derived. Zero means election.DefaultTTL (10s), the nodes' default;
	// it must be at least election.MinTTL (2s), as theirs. It affects only how long an attempt waits, never what is admitted: a
	// value other than the fleet's makes a Client give up on an unanswering
	// owner sooner or later than it could.
	SessionTTL time.Duration
	// AttemptTimeout bounds how long one attempt waits for its answer (the
	// response's headers; reading the body is bounded by ctx only). An
	// attempt that times out (its error errors.Is ErrAttemptTimeout and
	// context.DeadlineExceeded) is retried as a connection error is, with
	// the same idempotency key. Zero means SessionTTL/2 (5s by default);
	// negative means no bound but ctx's.
	//
	// Why SessionTTL/2: an owner that does not answer may be paused (GC,
	// SIGSTOP, VM migration) or cut off from etcd. Its lease then expires
	// at most SessionTTL after it stopped renewing, its claims go with it,
	// and the next owner claims them within a few etcd round trips. Until
	// then the fleet still names the silent owner, so a retry can only go
	// back to it; from then on a retry reaches the new owner. With attempts
	// of TTL/k, a request sent to a paused owner is answered about
	// TTL + TTL/k after the pause began at worst (without a bound, only
	// when the pause ends), at the cost of about k copies queued at the
	// paused owner, which refuses them when it wakes without its session.
	// k = 2 bounds the wait at about 1.5 TTL with two or three copies, and
	// gives a healthy owner half a TTL to start answering before a copy is
	// sent.
	AttemptTimeout time.Duration
	// Backoff is the retry policy. Zero fields take DefaultBackoff's values.
	Backoff Backoff
	// Logger receives the client's diagnostics, among them why NewClient
	// is still waiting (etcd does not answer, or the fleet has no spec
	// yet). Nil discards them.
	Logger hclog.Logger
	// Clock times the retry delays. Nil means the real clock.
	Clock clockwork.Clock
	// Metrics, if not nil, receives the Client's Prometheus metrics (see
	// metrics.go); NewClient registers them and Close unregisters them.
	Metrics prometheus.Registerer
	// TracerProvider, if not nil, receives the Client's OpenTelemetry
	// spans: Do and each of its attempts, with refusals and retries as
	// events (see trace.go); each attempt carries its trace context in
	// the W3C traceparent header. Nil means no spans (never the global
	// provider).
	TracerProvider trace.TracerProvider
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.Scheme == "" {
		c.Scheme = "http"
	}
	c.Backoff = c.Backoff.withDefaults()
	b := c.bound().WithDefaults()
	c.SessionTTL, c.AttemptTimeout = b.SessionTTL, b.AttemptTimeout
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// Validate reports whether c, with its defaults applied, can configure a
// Client. Errors wrap ErrInvalidConfig; a Logger or Clock that is a typed
// nil also wraps ErrNilArgument.
func (c ClientConfig) Validate() error {
	d := c.withDefaults()
	if err := keys.CheckFleet(d.Cluster, d.Prefix); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if d.Partitions != 0 || d.LoadFactor != 0 || d.Algorithm != 0 {
		// Assertions: check each one that is set.
		ring := ring.DefaultConfig()
		ring.Algorithm = d.Algorithm
		if d.Partitions != 0 {
			ring.Partitions = d.Partitions
		}
		if d.LoadFactor != 0 {
			ring.LoadFactor = d.LoadFactor
		}
		if err := ring.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if d.Scheme != "http" && d.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q must be \"http\" or \"https\"", ErrInvalidConfig, d.Scheme)
	}
	if err := d.bound().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := nilFields(nil, c.Logger, c.Clock, c.Metrics, c.TracerProvider); err != nil {
		return err
	}
	return validateBackoff(d.Backoff)
}

// bound returns the attempt bound that SessionTTL and AttemptTimeout
// describe (follow.Bound: their defaults and checks are grpcroute's too).
func (c ClientConfig) bound() follow.Bound {
	return follow.Bound{SessionTTL: c.SessionTTL, AttemptTimeout: c.AttemptTimeout}
}

// prefix returns the fleet's key prefix.
func (c ClientConfig) prefix() string {
	if c.Prefix != "" {
		return c.Prefix
	}
	return fleet.DefaultPrefix(c.Cluster)
}
