package router

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/nilness"

	"github.com/hashicorp/go-hclog"
)

const (
	// DefaultHandoffWait is Config.HandoffWait when it is zero: a planned
	// handoff takes a few etcd round trips plus the drain of in-flight work,
	// so 2s covers it with room while still failing fast when the new owner
	// is gone.
	DefaultHandoffWait = 2 * time.Second

	// maxIdleConnsPerHost is the idle connection limit per node of the
	// transport the Router builds when Config.Transport is nil. Every node
	// forwards to a handful of peers at high concurrency, so the standard
	// library's default of 2 would close and redial connections under load.
	maxIdleConnsPerHost = 256
)

// Config holds the tunables of a Router. The zero value of each field
// selects its documented default; DefaultConfig returns them filled in.
type Config struct {
	// HandoffWait bounds how long Do and the HTTP handler wait for a
	// partition in handoff (being released by this node, or about to be
	// claimed by it, or with no owner known) before giving up with an
	// *ownership.WrongOwnerError. The wait also ends with the caller's context. Zero
	// means DefaultHandoffWait; it must not be negative.
	HandoffWait time.Duration

	// Scheme is the URL scheme used to forward requests to other nodes.
	// Empty means "http".
	Scheme string

	// Transport forwards requests to other nodes. Nil means a clone of
	// http.DefaultTransport that keeps up to 256 idle connections per node,
	// whose idle connections Close closes.
	Transport http.RoundTripper

	// FlushInterval is httputil.ReverseProxy's flush interval for forwarded
	// responses. Zero flushes streamed responses (unknown length or
	// text/event-stream) as each write arrives and buffers the others;
	// negative flushes after every write.
	FlushInterval time.Duration

	// Rewrite, if not nil, is called on every request the Router forwards
	// to another node, once the Router has prepared it (pr.Out's URL names
	// the owner, and X-Forwarded-For, -Host and -Proto are set), to add
	// what the fleet's nodes ask of each other: an identity, a credential,
	// a tracing header. What the Router sets stays the Router's: after the
	// hook it sets the URL's scheme and host, the Tenure-Forwarded and
	// Tenure-Ring-Version headers again and removes httpfence.Header and
	// httpfence.SignatureHeader, so that no hook sends a request elsewhere or
	// passes a token on. It is called from many goroutines at once and
	// must not block. Nil adds nothing.
	Rewrite func(pr *httputil.ProxyRequest)

	// Logger receives the router's diagnostics (failed forwards at debug
	// level). Nil discards them.
	Logger hclog.Logger

	// Backoff spaces Do's attempts when work reports that its tenure ended
	// (see Router.Do) and bounds their number. Zero fields take
	// DefaultBackoff's values.
	Backoff Backoff

	// Clock times the handoff wait. Nil means the real clock; a
	// simulation passes its virtual clock, as it does to the node.
	Clock clockwork.Clock

	// Metrics, if not nil, receives the Router's Prometheus metrics, under
	// the const label node=<node ID> (see metrics.go); New registers them
	// and Close unregisters them.
	Metrics prometheus.Registerer

	// TracerProvider, if not nil, receives the Router's OpenTelemetry
	// spans: Do, each attempt of it, and each request to its Handler (see
	// trace.go); forwards carry the trace context in the W3C traceparent
	// header. Nil means no spans (never the global provider).
	TracerProvider trace.TracerProvider
}

// DefaultConfig returns the default configuration: a 2s handoff wait,
// forwarding over plain HTTP with a pooled transport, no logging and the
// real clock.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.HandoffWait == 0 {
		c.HandoffWait = DefaultHandoffWait
	}
	if c.Scheme == "" {
		c.Scheme = "http"
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	c.Backoff = c.Backoff.withDefaults()
	return c
}

// Validate reports whether c, with its defaults applied, can configure a
// Router. Errors wrap ErrInvalidConfig; a Transport, Logger or Clock that
// is a typed nil (such as a nil *http.Transport) also wraps
// ErrNilArgument.
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case d.HandoffWait < 0:
		return fmt.Errorf("%w: handoff wait %v must not be negative", ErrInvalidConfig, d.HandoffWait)
	case d.Scheme != "http" && d.Scheme != "https":
		return fmt.Errorf("%w: scheme %q must be \"http\" or \"https\"", ErrInvalidConfig, d.Scheme)
	}
	if err := nilFields(c.Transport, c.Logger, c.Clock, c.Metrics, c.TracerProvider); err != nil {
		return err
	}
	return validateBackoff(d.Backoff)
}

// newTransport returns the pooled transport used when none is configured.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.MaxIdleConns = 0 // no global limit; the per-host limit bounds it
	return t
}

// nilFields reports a Transport, Logger, Clock, Metrics or TracerProvider field that holds
// a typed nil, on which the first call would panic. (An untyped nil selects
// the field's default.)
func nilFields(transport http.RoundTripper, logger hclog.Logger, clk clockwork.Clock, reg prometheus.Registerer, tp trace.TracerProvider) error {
	err := nilness.TypedNil(nilness.Field{Name: "transport", Value: transport}, nilness.Field{Name: "logger", Value: logger},
		nilness.Field{Name: "clock", Value: clk}, nilness.Field{Name: "metrics registerer", Value: reg}, nilness.Field{Name: "tracer provider", Value: tp})
	if err != nil {
		return fmt.Errorf("%w: %w: %w", ErrInvalidConfig, ErrNilArgument, err)
	}
	return nil
}
