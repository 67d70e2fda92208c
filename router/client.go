package router

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/router/internal/follow"
	"github.com/tenure-go/tenure/router/internal/spans"

	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// Client sends requests for keys straight to their owners, for callers
// outside the fleet. It follows the fleet's members and claims in etcd
// through a fleet.Observer (read-only, no lease; the reader the nodes
// use), whose immutable routing table lookups read without locking. A Client is safe for concurrent use by
// multiple goroutines.
type Client struct {
	cfg       ClientConfig
	obs       *fleet.Observer
	httpc     *http.Client
	transport *http.Transport // set when the Client built it
	closed    atomic.Bool

	attempts atomic.Int64
	retries  atomic.Int64
	results  clientResults
	metrics  *metrics.Set  // nil without ClientConfig.Metrics
	trace    *spans.Tracer // nil without ClientConfig.TracerProvider
}

// NewClient reads the fleet's spec (its partition count, load factor and
// ring algorithm) and then its members and claims through etcd, bounded by
// ctx, and returns a Client that keeps watching them until Close. It needs
// only reads and watches, no lease: a *clientv3.Client satisfies
// fleet.FleetClient.
//
// While no node has joined the fleet (fleet.ErrNoSpec), NewClient
// waits for the spec, watching for it; while etcd does not answer, it
// tries again. It logs why it waits, and when ctx ends first it returns an
// error wrapping ownership.ErrUnavailable (etcd did not answer; the
// message names the last cause, such as a refused connection) or
// fleet.ErrNoSpec, and ctx's error. An etcd client that is closed, or is
// closed while NewClient waits, ends the wait at once with an error
// wrapping ownership.ErrClientClosed. Other errors wrap ErrNilArgument,
// ErrInvalidConfig, ring.ErrSpecMismatch (cfg asserts a partition count,
// load factor or ring algorithm that differs from the spec's; the error is an
// *ring.SpecMismatchError), ring.ErrSpecMismatch (a claim outside
// the spec's partitions) or the etcd error.
func NewClient(ctx context.Context, etcd fleet.FleetClient, cfg ClientConfig) (*Client, error) {
	if nilness.Is(etcd) {
		return nil, fmt.Errorf("%w: etcd client %T", ErrNilArgument, etcd)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if etcderr.Closed(etcd) {
		return nil, fmt.Errorf("router: new client: %w", ownership.ErrClientClosed)
	}
	bound, unbind := etcderr.BindClient(ctx, etcd, ownership.ErrClientClosed)
	defer unbind()
	c, err := newClient(bound, etcd, cfg)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(bound), ownership.ErrClientClosed) {
		return nil, fmt.Errorf("router: new client: %w while reading the fleet", ownership.ErrClientClosed)
	}
	return c, err
}

// newClient is NewClient after its checks of the arguments.
func newClient(ctx context.Context, etcd fleet.FleetClient, cfg ClientConfig) (*Client, error) {
	spec, err := waitSpec(ctx, etcd, cfg.prefix(), cfg.Logger, cfg.Clock)
	if err != nil {
		return nil, err
	}
	if err := assertSpec(spec, cfg); err != nil {
		return nil, err
	}
	cfg.Partitions, cfg.LoadFactor, cfg.Algorithm = spec.Partitions, spec.LoadFactor, spec.RingAlgorithm
	obs, err := fleet.Observe(ctx, etcd, fleet.ObserverConfig{
		Cluster: cfg.Cluster,
		Prefix:  cfg.Prefix,
		Ring:    spec.Config(),
		Logger:  cfg.Logger,
		Clock:   cfg.Clock,
	})
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, obs: obs, httpc: cfg.HTTPClient, trace: spans.New(cfg.TracerProvider, tracerScope)}
	if c.metrics, err = registerClientMetrics(cfg.Metrics, c); err != nil {
		obs.Close()
		return nil, err
	}
	if c.httpc == nil {
		c.transport = newTransport()
		c.httpc = &http.Client{Transport: c.transport}
	}
	return c, nil
}

// Verify reports whether the fleet issued t, against the Client's watched
// view of the fleet's claims (fleet.Observer.Verify): a service that
// already routes with a Client passes it as its httpfence.Config's
// Verifier, so that it admits only tokens of real tenures, without a round
// trip to etcd per request. sig is not consulted.
func (c *Client) Verify(ctx context.Context, t fence.Token, sig fence.Signature) error {
	return c.obs.Verify(ctx, t, sig)
}

// Close stops watching etcd and closes the idle connections of the
// transport the Client built. Requests in progress are not interrupted;
// later ones fail with ErrClosed. Close is idempotent.
func (c *Client) Close() {
	c.closed.Store(true)
	c.metrics.Unregister()
	c.obs.Close()
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// Changed returns a channel that is closed the next time the Client's view
// of the fleet changes.
func (c *Client) Changed() <-chan struct{} { return c.obs.Changed() }

// Lookup returns where requests for key go: the route of key's partition
// (xxhash64(key) mod the fleet's partition count: Route.Partition), whose
// owner is the holder of the partition's claim, or while nobody holds
// one, the ring's choice of the next owner. It takes no lock and does not
// allocate.
func (c *Client) Lookup(key string) fleet.Route { return c.obs.Lookup(key) }

// LookupPartition returns the route of partition p as the Client currently
// sees it, or the zero Route with Partition p if p is outside
// [0, Partitions). Like Lookup, it takes no lock and does not allocate.
func (c *Client) LookupPartition(p int) fleet.Route { return c.obs.LookupPartition(p) }

// ClientStats counts a Client's work since it was created.
type ClientStats struct {
	// Attempts is the number of requests sent to nodes, retries included.
	// An attempt that found no node to send to is not counted.
	Attempts int64
	// Retries is the number of requests sent to nodes that repeated an
	// earlier sent attempt of the same call of Do: Attempts minus the calls
	// that sent anything.
	Retries int64
	// Resyncs is the number of times the Client read the fleet again after
	// its watch failed.
	Resyncs int64
	// OK, Retried and Failed count the calls of Do that were answered at
	// the first attempt, answered after retries, and failed with an error.
	OK, Retried, Failed int64
}

// Stats returns the Client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Attempts: c.attempts.Load(), Retries: c.retries.Load(), Resyncs: c.obs.Resyncs(),
		OK: c.results.ok.Load(), Retried: c.results.retried.Load(), Failed: c.results.failed.Load()}
}

// Do sends req to the owner of key and returns its response, which the
// caller must close. The request's URL scheme and host are replaced by the
// owner's (a placeholder host will do: http.NewRequestWithContext(ctx,
// "GET", "http://tenure/users/42", nil)); the path, query, headers and body
// are kept. Every attempt
// carries the same HeaderIdempotencyKey: the request's own, or a random one
// Do sets.
//
// When the answer is a retryable refusal (httpfence.ReadRefusal reads it
// and Refusal.Retryable holds: not-owner, handoff, session-lost, stale,
// unavailable), or the request fails without an HTTP answer (connection
// refused or reset, timeout), Do resolves the owner again (using the
// refusal's hint when it is newer than the Client's view) and retries: at
// once when the hint is news (a claim newer than any the call has seen,
// or, once per call, the next owner of the claim that ended), otherwise
// after a delay, as cfg.Backoff describes, cut short when the Client's
// view of the key's partition changes (clientwait.go). A planned move of the key's partition
// therefore never fails at the caller: the old owner refuses the work it
// can no longer do, and the request goes to the new owner. It returns:
//
//   - the first response that is not retried, with a nil error; application
//     errors (4xx, 5xx), and refusals that are not retryable (an invalid or
//     missing token), are responses, not errors;
//   - an error wrapping ErrRetriesExhausted and the last attempt's error
//     (a *httpfence.Refusal and, for the router's own refusals, an
//     *ownership.WrongOwnerError) once every attempt failed;
//   - an error wrapping ErrNotReplayable if a retry was needed but req's
//     body cannot be read again (set req.GetBody, as http.NewRequest does
//     for in-memory bodies);
//   - an error wrapping httpfence.ErrInvalidRefusal for an answer that
//     names a refusal that cannot be read;
//   - an error wrapping ctx's error if ctx ends first.
//
// A refusal says nothing of writes a handler made before it refused, and
// after a connection error the request may or may not have been applied:
// servers that dedupe on HeaderIdempotencyKey make a retry with the same
// key safe.
func (c *Client) Do(ctx context.Context, key string, req *http.Request) (_ *http.Response, err error) {
	sent := 0 // attempts sent to a node
	ctx, sp := c.trace.Start(ctx, spanClientDo, trace.SpanKindClient)
	defer func() {
		c.results.record(sent, err)
		spans.End(sp, err)
	}()
	if req == nil {
		return nil, fmt.Errorf("%w: request", ErrNilArgument)
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	idem := req.Header.Get(HeaderIdempotencyKey)
	if idem == "" {
		idem = rand.Text()
	}
	var (
		last   error
		hint   *ownership.WrongOwnerError
		failed string      // address of the last failed attempt
		tried  fleet.Route // the route of the last attempt
		now    bool        // the last refusal's hint is news: no delay
		seen   follow.Progress
	)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if attempt > c.cfg.Backoff.MaxAttempts {
				return nil, fmt.Errorf("%w: key %q: %d attempts, %d sent: %w", ErrRetriesExhausted, key, attempt-1, sent, last)
			}
			if !replayable && sent > 0 {
				return nil, fmt.Errorf("%w: %w", ErrNotReplayable, last)
			}
			spans.Event(sp, spans.EventRetry, spans.Attempt.Int(attempt), spans.Reason.String(last.Error()))
			if !now {
				if err := c.wait(ctx, attempt-1, tried); err != nil {
					return nil, fmt.Errorf("router: key %q: %w (last attempt: %w)", key, err, last)
				}
			}
		}
		if err := ctx.Err(); err != nil {
			if last != nil {
				return nil, fmt.Errorf("router: key %q: %w (last attempt: %w)", key, err, last)
			}
			return nil, err
		}
		if c.closed.Load() {
			return nil, ErrClosed
		}
		route := c.resolve(key, hint, failed)
		tried, now = route, false
		if route.Addr == "" {
			last = &unroutedError{&ownership.WrongOwnerError{Route: route}}
			continue
		}
		var body io.ReadCloser
		if sent > 0 && req.GetBody != nil {
			if body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("router: request body for retry: %w", err)
			}
		}
		sent++
		c.attempts.Add(1)
		if sent > 1 {
			c.retries.Add(1)
		}
		actx, asp := c.startAttempt(ctx, route, attempt)
		resp, err := c.send(actx, req, body, idem, route.Addr)
		if err != nil {
			spans.End(asp, err)
			if cerr := ctx.Err(); cerr != nil {
				if errors.Is(err, cerr) {
					return nil, err
				}
				return nil, fmt.Errorf("router: key %q: %w (last attempt: %w)", key, cerr, err)
			}
			last, hint, failed = err, nil, route.Addr
			continue
		}
		ref, err := readRefusal(resp)
		if err != nil {
			spans.End(asp, err)
			drain(resp.Body)
			return nil, fmt.Errorf("router: key %q: %s from %s: %w", key, resp.Status, route.Addr, err)
		}
		if ref == nil || !ref.Retryable() {
			spans.End(asp, nil)
			return resp, nil
		}
		spans.Event(asp, spans.EventRefused, spans.Refusal.String(string(ref.Kind)))
		spans.End(asp, ref)
		if hint, err = refusalHint(ref); err != nil {
			drain(resp.Body)
			return nil, fmt.Errorf("router: key %q: %s from %s: %w", key, resp.Status, route.Addr, err)
		}
		last = fmt.Errorf("router: %s from %s: %w", resp.Status, route.Addr, &refusedError{Refusal: ref, hint: hint})
		failed, now = route.Addr, seen.News(route, hintRoute(hint))
		drain(resp.Body)
	}
}

// resolve returns the route for key, preferring the hint of the last
// misdirected answer when it names a newer claim than the view, or when the
// view still names the node that just failed (follow.Choose).
func (c *Client) resolve(key string, hint *ownership.WrongOwnerError, failed string) fleet.Route {
	return follow.Choose(c.Lookup(key), hintRoute(hint), failed)
}

// readRefusal reads the refusal of resp with httpfence.ReadRefusal, the
// one decoder of tenure's refusals. When resp is no refusal or one that is
// not retried, resp's body is left whole for the caller: what
// ReadRefusal read of it is read again first.
func readRefusal(resp *http.Response) (*httpfence.Refusal, error) {
	if len(resp.Header.Values(httpfence.RefusalHeader)) == 0 {
		return nil, nil // fast path: no refusal, nothing to read
	}
	body := resp.Body
	var seen bytes.Buffer
	if body != nil {
		resp.Body = io.NopCloser(io.TeeReader(body, &seen))
	}
	ref, err := httpfence.ReadRefusal(resp)
	if body != nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(&seen, body), body}
	}
	return ref, err
}
