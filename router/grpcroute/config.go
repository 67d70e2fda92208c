package grpcroute

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// ServerConfig configures a Server. The zero value of each field selects
// its documented default.
type ServerConfig struct {
	// Key returns the routing key of a unary call from its request. Nil
	// means the key of the call's MetadataKey metadata, which a Client
	// sets. With Key, a call whose MetadataKey metadata names another key
	// (or more than one) fails with codes.InvalidArgument, and a call
	// without it is routed by Key alone (see
	// ClientConfig.OmitKeyMetadata). Streaming calls always take the key
	// from the metadata (their messages arrive after the call was
	// admitted).
	Key KeyFunc
	// Routed reports whether calls to the full method name method are
	// routed by key. Nil means every method is; return false for methods
	// that any node serves (health checks, reflection).
	Routed func(method string) bool
	// HandoffWait bounds how long a call for a partition in handoff waits
	// for the routing table to change before it is refused, as
	// router.Config.HandoffWait. Zero means router.DefaultHandoffWait (2s).
	HandoffWait time.Duration
	// Logger receives the server's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Clock times the handoff waits. Nil means the real clock.
	Clock clockwork.Clock
	// Metrics, if not nil, receives the Server's Prometheus metrics (see
	// metrics.go); NewServer registers them and Close unregisters them.
	Metrics prometheus.Registerer
	// TracerProvider, if not nil, receives a span for every routed call
	// (see trace.go), continuing the trace its W3C traceparent metadata
	// carries. Nil means no spans (never the global provider).
	TracerProvider trace.TracerProvider
}

// DefaultServerConfig returns the ServerConfig with every default filled in.
func DefaultServerConfig() ServerConfig { return ServerConfig{}.withDefaults() }

func (c ServerConfig) withDefaults() ServerConfig {
	if c.HandoffWait == 0 {
		c.HandoffWait = router.DefaultHandoffWait
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// Validate reports whether c can configure a Server. Errors wrap
// ErrInvalidConfig; a typed nil Logger, Clock or Metrics also wraps
// ErrNilArgument.
func (c ServerConfig) Validate() error {
	if c.HandoffWait < 0 {
		return fmt.Errorf("%w: handoff wait %v must not be negative", ErrInvalidConfig, c.HandoffWait)
	}
	return nilFields(c.Logger, c.Clock, c.Metrics, c.TracerProvider)
}

// ClientConfig configures a Client. The zero value of each field selects
// its documented default.
type ClientConfig struct {
	// Key returns the routing key of a unary call from its request. Nil
	// means the key WithKey put in the call's context, else the
	// MetadataKey of its outgoing metadata. Streaming calls always take
	// the key from the context or the metadata.
	Key KeyFunc
	// OmitKeyMetadata leaves the MetadataKey metadata out of unary calls
	// whose key Key takes from the request, which saves sending the key
	// twice. Set it only for fleets whose ServerConfig.Key takes the same
	// key from the request message: a Server without a Key fails such
	// calls with codes.InvalidArgument (no key). False, the default,
	// sends the key in the metadata on every call. It needs Key.
	OmitKeyMetadata bool
	// NoIdempotencyKey, if not nil, reports whether calls to the full
	// method name method go without a MetadataIdempotencyKey: return
	// true only for methods whose handlers may run an attempt again
	// without harm (reads, or writes that set a whole value), since a
	// retried attempt may follow one that ran. Such a method's proto may
	// say so with option idempotency_level = NO_SIDE_EFFECTS or
	// IDEMPOTENT. The key costs the call a header whose value is new on
	// every call. Nil means every call carries one.
	NoIdempotencyKey func(method string) bool
	// SessionTTL is the lease TTL of the fleet's nodes (their
	// ownership.Config.Session.TTL), from which AttemptTimeout's default is
	// derived, as router.ClientConfig.SessionTTL. Zero means
	// election.DefaultTTL (10s), the nodes' default; it must be at least
	// election.MinTTL (2s), as theirs. It affects only how long an attempt
	// waits, never what is admitted: a value other than the fleet's makes
	// a Client give up on an unanswering owner sooner or later than it
	// could.
	SessionTTL time.Duration
	// AttemptTimeout bounds how long one attempt waits for its node to
	// answer, as router.ClientConfig.AttemptTimeout does for a request
	// (whose documentation says why half a TTL). An attempt cut off at the
	// bound (its error errors.Is router.ErrAttemptTimeout and
	// context.DeadlineExceeded; status code DeadlineExceeded) is retried
	// as an unavailable owner is, with the same idempotency key, so that a
	// call sent to a paused owner is answered by its successor about one
	// bound after the paused owner's lease expired, instead of when the
	// pause ends. Zero means SessionTTL/2 (5s by default); negative means
	// no bound but the call's deadline.
	//
	// The bound counts from the moment the balancer sends the attempt to
	// a node. A unary attempt's answer is its reply or status. A
	// streaming attempt's answer is the first thing its node sends (its
	// header, a message, or its status), and until then the bound counts
	// only the time the caller waits on the stream, from its last message
	// sent: a long upload is not cut off, nor a stream that has started
	// answering, however long it lasts. The package documentation ("Owners
	// that do not answer") says it in full.
	AttemptTimeout time.Duration
	// Backoff is the retry policy of refused calls and of attempts cut
	// off by AttemptTimeout: zero fields take
	// router.DefaultBackoff's values (10 attempts, 5ms doubling to 1s,
	// jittered). Every attempt is also bounded by the call's deadline.
	Backoff router.Backoff
	// Logger receives the client's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Clock times the retry delays and the attempts' bound. Nil means the
	// real clock.
	Clock clockwork.Clock
	// Metrics, if not nil, receives the Client's Prometheus metrics (see
	// metrics.go); NewClient registers them and Close unregisters them.
	Metrics prometheus.Registerer
	// TracerProvider, if not nil, receives the Client's spans: each unary
	// call and each attempt of it, refusals and retries as events (see
	// trace.go); every attempt carries its trace context in the W3C
	// traceparent metadata. Nil means no spans (never the global
	// provider).
	TracerProvider trace.TracerProvider
}

// DefaultClientConfig returns the ClientConfig with every default filled in.
func DefaultClientConfig() ClientConfig { return ClientConfig{}.withDefaults() }

func (c ClientConfig) withDefaults() ClientConfig {
	c.Backoff = router.Backoff(retry.Policy(c.Backoff).WithDefaults())
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

// Validate reports whether c, with its defaults applied, can configure
// a Client. Errors wrap ErrInvalidConfig, and router.ErrInvalidBackoff
// for a Backoff that does not validate; a typed nil Logger, Clock or
// Metrics also wraps ErrNilArgument.
func (c ClientConfig) Validate() error {
	if c.OmitKeyMetadata && c.Key == nil {
		return fmt.Errorf("%w: OmitKeyMetadata needs a Key", ErrInvalidConfig)
	}
	if err := c.bound().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Backoff.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nilFields(c.Logger, c.Clock, c.Metrics, c.TracerProvider)
}

// policy converts Backoff to the type of tenure's retry loop, whose fields
// are router.Backoff's.
func (c ClientConfig) policy() retry.Policy { return retry.Policy(c.Backoff) }

// bound returns the attempt bound that SessionTTL and AttemptTimeout
// describe (follow.Bound: their defaults and checks are router.Client's
// too).
func (c ClientConfig) bound() follow.Bound {
	return follow.Bound{SessionTTL: c.SessionTTL, AttemptTimeout: c.AttemptTimeout}
}

// nilFields returns an error if one of the optional fields is a typed nil.
func nilFields(log hclog.Logger, clk clockwork.Clock, reg prometheus.Registerer, tp trace.TracerProvider) error {
	for name, v := range map[string]any{"logger": log, "clock": clk, "metrics registerer": reg, "tracer provider": tp} {
		if v != nil && nilness.Is(v) {
			return fmt.Errorf("%w: %w: %s is a typed nil", ErrInvalidConfig, ErrNilArgument, name)
		}
	}
	return nil
}
