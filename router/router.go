package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/admit"
	"github.com/tenure-go/tenure/router/internal/spans"
)

// Node is what a Router needs from the local node of the fleet.
// *ownership.Node satisfies it.
type Node interface {
	// ID returns the node's ID.
	ID() string
	// Lookup returns the route of key's partition; it must not block.
	Lookup(key string) fleet.Route
	// Hold admits local work for key, or says who owns it.
	Hold(key string) (ownership.Held, error)
	// Changed returns a channel closed at the next routing change.
	Changed() <-chan struct{}
}

var _ Node = (*ownership.Node)(nil)

// Router routes work by key to the key's owner, for one node of the fleet:
// in process with Do, and over HTTP with Handler. A Router is safe for
// concurrent use by multiple goroutines.
type Router struct {
	node      Node
	id        string
	cfg       Config
	log       hclog.Logger
	proxy     *httputil.ReverseProxy
	transport *http.Transport // set when the Router built it (and closes it)
	closed    atomic.Bool

	served, forwarded, refused atomic.Int64
	metrics                    *metrics.Set  // nil without Config.Metrics
	trace                      *spans.Tracer // nil without Config.TracerProvider
}

// Stats counts what a Router did with the requests it received since it
// was created, through its HTTP handlers and through Do.
type Stats struct {
	// Served is the number of requests served locally: by an HTTP
	// handler's local handler, or by a run of Do's fn.
	Served int64
	// Forwarded is the number of requests forwarded to their owner (whether
	// or not the owner answered).
	Forwarded int64
	// Refused is the number of requests the router answered itself with a
	// refusal (not-owner, handoff, session-lost) instead of serving or
	// forwarding them, the calls of Do that returned a wrong-owner answer,
	// plus the refusals local handlers wrote with
	// WriteError for work whose tenure ended (those also count as Served).
	// A forward that fails, answered with a handoff refusal, counts as
	// Forwarded only.
	Refused int64
}

// Stats returns the Router's counters. It takes no lock.
func (r *Router) Stats() Stats {
	return Stats{Served: r.served.Load(), Forwarded: r.forwarded.Load(), Refused: r.refused.Load()}
}

// New returns a Router for node. The node's lifetime is the caller's: Close
// the Router before or after closing the node. It returns an error wrapping
// ErrNilArgument if node is nil, or ErrInvalidConfig if cfg does not
// validate.
func New(node Node, cfg Config) (*Router, error) {
	if nilness.Is(node) {
		return nil, fmt.Errorf("%w: node", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Router{node: node, id: node.ID(), cfg: cfg, log: cfg.Logger, trace: spans.New(cfg.TracerProvider, tracerScope)}
	rt := cfg.Transport
	if rt == nil {
		r.transport = newTransport()
		rt = r.transport
	}
	r.proxy = &httputil.ReverseProxy{
		Rewrite:       r.rewrite,
		BufferPool:    &bufferPool{},
		Transport:     rt,
		FlushInterval: cfg.FlushInterval,
		ErrorHandler:  r.forwardError,
		ErrorLog:      cfg.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	var err error
	if r.metrics, err = registerRouterMetrics(cfg.Metrics, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Close stops the Router: Do then returns ErrClosed and the HTTP handler
// answers 503. It closes the idle connections of the transport the Router
// built. Work in progress is not interrupted. Close is idempotent.
func (r *Router) Close() {
	r.closed.Store(true)
	r.metrics.Unregister()
	if r.transport != nil {
		r.transport.CloseIdleConnections()
	}
}

// Do runs fn on this node if it owns key's partition: fn is counted as in
// flight (a handoff of the partition waits for it to return, up to the
// node's drain timeout) and runs under a context that carries the
// partition's fencing token (fence.FromContext) and ends when either ctx or
// the partition's tenure ends, with the tenure's cause (ownership.ErrMoved,
// ErrLost or ErrClosed). Do returns fn's error unchanged, except when it
// says that the tenure ended (see below).
//
// If another node owns the partition, Do returns the node's
// *ownership.WrongOwnerError naming it (errors.Is
// ownership.ErrNotOwner): send the work there. If the partition is in handoff (this node is releasing it or
// acquiring it, as the error says, or its owner is unknown), Do first
// waits for the routing table to change, up to Config.HandoffWait and while
// ctx lasts, and runs fn if the partition is then served here; when ctx
// ends first, the error wraps ctx's error as well. If the node or the
// Router is closed, the error wraps ErrClosed.
//
// Planned moves are invisible to the caller: if fn returns an error that
// says its tenure ended (errors.Is(err, fence.ErrStale): the store refused
// its write; ownership.ErrMoved, ErrLost or ErrClosed; or its context's
// error while the context's cause is the end of the tenure: ownership.Ended
// holds) and ctx has not ended, Do waits as for a handoff and runs fn
// again if the partition is (again)
// served here, after a delay of Config.Backoff, or else returns the
// *ownership.WrongOwnerError naming the new owner, where the caller sends
// the work next. fn may therefore run more than once: make its side effects
// idempotent (a write refused as stale did not happen). When every attempt
// Config.Backoff allows reported the end of a tenure, the error wraps
// ErrRetriesExhausted and fn's last error.
func (r *Router) Do(ctx context.Context, key string, fn func(ctx context.Context, t fence.Token) error) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: function", ErrNilArgument)
	}
	ctx, sp := r.trace.Start(ctx, spanDo, trace.SpanKindInternal)
	defer func() { spans.End(sp, err) }()
	for attempt := 1; ; attempt++ {
		if r.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		h, hint, err := r.hold(ctx, key)
		if err != nil {
			err = r.holdError(ctx, err, hint)
			if errors.Is(err, ownership.ErrNotOwner) {
				r.refused.Add(1)
			}
			spans.Event(sp, spans.EventRefused, refusalOf(err))
			return err
		}
		r.served.Add(1)
		actx, asp := r.startDoAttempt(ctx, h, attempt)
		ended, err := run(actx, h, fn)
		spans.End(asp, err)
		if !ended {
			return err
		}
		spans.Event(sp, spans.EventRetry, spans.Reason.String("the work reports the end of its tenure"))
		if attempt >= r.cfg.Backoff.MaxAttempts {
			return fmt.Errorf("%w: %d attempts for key %q: %w", ErrRetriesExhausted, attempt, key, err)
		}
		r.log.Debug("work reports the end of its tenure; routing it again", "key", key, "error", err)
		if werr := r.cfg.Backoff.policy().Wait(ctx, r.cfg.Clock, attempt); werr != nil {
			return fmt.Errorf("router: key %q: %w (the work reported: %w)", key, werr, err)
		}
	}
}

// run runs fn under h and returns its error, reporting whether the error
// says that fn's tenure ended while ctx still lasts.
func run(ctx context.Context, h ownership.Held, fn func(ctx context.Context, t fence.Token) error) (ended bool, err error) {
	defer h.Release()
	wctx := admit.WorkContext(ctx, h, nil, nil)
	defer wctx.Release()
	err = fn(wctx, h.Token)
	if err == nil || ctx.Err() != nil {
		return false, err
	}
	_, ended = ownership.Ended(wctx, err)
	return ended, err
}

// hold admits work for key, waiting for handoffs as Do describes
// (admit.Hold). When it does not admit it, it returns the node's last
// answer (or ctx's error, as an *admit.WaitError) and the hint of where the
// work goes.
func (r *Router) hold(ctx context.Context, key string) (ownership.Held, *ownership.WrongOwnerError, error) {
	return admit.Hold(ctx, r.node, admit.Wait{Self: r.id, For: r.cfg.HandoffWait, Clock: r.cfg.Clock}, key)
}

// elsewhere reports whether we names another node, with an address, to
// send the request to (admit.Elsewhere).
func (r *Router) elsewhere(we *ownership.WrongOwnerError) bool { return admit.Elsewhere(we, r.id) }

// holdError turns hold's error into the Router's error: the node's
// *ownership.WrongOwnerError as it is (wrapped with ctx's error if the wait
// for a handoff ended with ctx), or, when the node's answer says that its
// tenures ended because it closed (ownership.Ended of the answer alone
// is ownership.ErrClosed), ErrClosed wrapping the node's
// answer and the hint of the next owner when it names another node.
func (r *Router) holdError(ctx context.Context, err error, hint *ownership.WrongOwnerError) error {
	_, named := errors.AsType[*ownership.WrongOwnerError](err)
	if reason, ended := ownership.Ended(context.Background(), err); ended && reason == ownership.ErrClosed {
		if !named && r.elsewhere(hint) {
			return fmt.Errorf("%w: %w: %w", ErrClosed, err, hint)
		}
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	if named {
		if _, waited := err.(*admit.WaitError); waited {
			return fmt.Errorf("router: %w", err)
		}
		return hint
	}
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("router: %w", err)
}

// bufferPool recycles the ReverseProxy's copy buffers, which it would
// otherwise allocate (32 KiB) for every forwarded request.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
