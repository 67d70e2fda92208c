package grpcroute

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/internal/follow"
	"github.com/tenure-go/tenure/router/internal/spans"
)

// Client makes gRPC connections to a fleet that send each call to the
// owner of its key. A connection's target names the fleet (Target,
// TargetPrefix); its resolver reads the fleet's spec and follows its
// members and claims through a fleet.Observer (read-only, no lease), and
// its balancer sends each call to the owner's address, never to another
// node while the owner is known. The Client's interceptors take each
// call's key, give every attempt of a call the same idempotency key, cut
// off an attempt that has no answer within the ClientConfig's
// AttemptTimeout, and retry calls that a node refused with a retryable
// refusal, that found their owner unavailable, or whose attempt was cut
// off, with backoff, bounded by the ClientConfig's Backoff and by the
// call's deadline. A Client is safe for concurrent use by multiple
// goroutines.
type Client struct {
	etcd fleet.FleetClient
	cfg  ClientConfig
	log  hclog.Logger
	idem idempotencyKeys

	attempts, retries   atomic.Int64
	ok, retried, failed atomic.Int64
	metrics             *metrics.Set  // nil without ClientConfig.Metrics
	trace               *spans.Tracer // nil without ClientConfig.TracerProvider
}

// ClientStats counts a Client's calls since it was created.
type ClientStats struct {
	// Attempts is the number of attempts made, retries included.
	Attempts int64
	// Retries is the number of attempts that repeated a refused or
	// unavailable one of the same call, or one cut off by
	// AttemptTimeout.
	Retries int64
	// OK, Retried and Failed count the calls answered at the first
	// attempt, answered after retries, and failed with an error (the
	// handler's own errors included).
	OK, Retried, Failed int64
}

// NewClient returns a Client that reads fleets through etcd (reads and
// watches, no lease: a *clientv3.Client satisfies fleet.FleetClient). It
// talks to etcd only when a connection is made. It returns an error wrapping
// ErrNilArgument if etcd is nil, ErrInvalidConfig if cfg does not
// validate, or ErrMetrics.
func NewClient(etcd fleet.FleetClient, cfg ClientConfig) (*Client, error) {
	if nilness.Is(etcd) {
		return nil, fmt.Errorf("%w: etcd client %T", ErrNilArgument, etcd)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{etcd: etcd, cfg: cfg, log: cfg.Logger, idem: idempotencyKeys{prefix: rand.Text()}, trace: spans.New(cfg.TracerProvider, tracerScope)}
	var err error
	if c.metrics, err = registerClientMetrics(cfg.Metrics, c); err != nil {
		return nil, err
	}
	return c, nil
}

// dialOptions returns the options that make a grpc.ClientConn for a
// target of the Client route by key: rb (the resolver), the owner balancer
// and the Client's interceptors (ahead of any given later).
func (c *Client) dialOptions(rb *resolverBuilder) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithResolvers(rb),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(c.Unary),
		grpc.WithChainStreamInterceptor(c.Stream),
	}
}

// NewConn returns a connection to the fleet target names (Target or
// TargetPrefix), made with grpc.NewClient and opts: its resolver follows
// the fleet, its balancer sends each call to its key's owner, and the
// Client's interceptors (Unary, Stream) run ahead of any given in opts.
// Add the transport credentials (see the package documentation for mTLS).
// Closing it stops following the fleet.
func (c *Client) NewConn(target string, opts ...grpc.DialOption) (*Conn, error) {
	cv := &connView{}
	cc, err := grpc.NewClient(target, append(c.dialOptions(&resolverBuilder{c: c, conn: cv}), opts...)...)
	if err != nil {
		return nil, err
	}
	return &Conn{ClientConn: cc, fleet: cv}, nil
}

// Stats returns the Client's counters. It takes no lock.
func (c *Client) Stats() ClientStats {
	return ClientStats{Attempts: c.attempts.Load(), Retries: c.retries.Load(),
		OK: c.ok.Load(), Retried: c.retried.Load(), Failed: c.failed.Load()}
}

// Close unregisters the Client's metrics. Its connections are their
// owner's to close. Close is idempotent.
func (c *Client) Close() { c.metrics.Unregister() }

// Unary is the Client's grpc.UnaryClientInterceptor, which NewConn
// installs; on a connection of one's own it gives the Client's retries
// without the owner balancer. It takes the call's
// key (ClientConfig.Key, else WithKey, else the MetadataKey metadata: a
// call without one fails with codes.InvalidArgument and an error wrapping
// ErrNoKey or ErrInvalidKey), sets the MetadataKey (unless the caller set
// it, or ClientConfig.OmitKeyMetadata leaves it out) and
// MetadataIdempotencyKey metadata (kept if the caller set it; none for
// the methods of ClientConfig.NoIdempotencyKey),
// and retries the call as Client describes. It returns the first answer
// that is not retried, or an error wrapping ErrRetriesExhausted and the
// last attempt's error (a status error, or the router.ErrAttemptTimeout
// of an attempt cut off).
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) (err error) {
	ctx, rt, err := c.prepare(ctx, method, req)
	if err != nil {
		c.failed.Add(1)
		return err
	}
	attempts := 0
	ctx, sp := c.trace.Start(ctx, spanCall, trace.SpanKindClient, rpcMethod.String(method))
	defer func() {
		c.record(attempts, err)
		spans.End(sp, err)
	}()
	for attempt := 1; ; attempt++ {
		attempts = attempt
		c.attempts.Add(1)
		err := c.invoke(ctx, rt, attempt, method, req, reply, cc, invoker, opts)
		if err == nil {
			return nil
		}
		if !c.again(ctx, rt, err) {
			return err
		}
		spans.Event(sp, spans.EventRetry, spans.Attempt.Int(attempt+1), spans.Reason.String(err.Error()))
		if werr := c.wait(ctx, method, rt, attempt, err); werr != nil {
			return werr
		}
	}
}

// invoke makes one attempt of a unary call, cut off if it has no answer
// within the ClientConfig's AttemptTimeout once the balancer sent it.
func (c *Client) invoke(ctx context.Context, rt *route, n int, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	a := c.newAttempt(ctx)
	rt.attempt.Store(a)
	actx, sp := c.trace.Start(a.context(ctx), spanAttempt, trace.SpanKindClient, spans.Attempt.Int(n))
	a.enter()
	err := invoker(c.withTrace(actx), method, req, reply, cc, opts...)
	a.leave(false)
	err = a.end(ctx, rt.tried().Addr, err)
	endAttempt(sp, rt, err)
	return err
}

// prepare returns ctx with the call's route and metadata, and the route.
func (c *Client) prepare(ctx context.Context, method string, req any) (context.Context, *route, error) {
	var (
		key string
		err error
	)
	fromReq := c.cfg.Key != nil && req != nil
	if fromReq {
		if key, err = c.cfg.Key(ctx, method, req); err != nil {
			return ctx, nil, userKeyError(err)
		}
		err = checkKey(key)
	} else {
		key, err = callKey(ctx)
	}
	if err != nil {
		return ctx, nil, err
	}
	var kv [4]string
	pairs := kv[:0]
	md, _ := metadata.FromOutgoingContext(ctx) // nil, without a copy, when ctx carries none
	if len(md.Get(MetadataKey)) == 0 && !(fromReq && c.cfg.OmitKeyMetadata) {
		pairs = append(pairs, MetadataKey, key)
	}
	if len(md.Get(MetadataIdempotencyKey)) == 0 && (c.cfg.NoIdempotencyKey == nil || !c.cfg.NoIdempotencyKey(method)) {
		pairs = append(pairs, MetadataIdempotencyKey, c.idem.next())
	}
	if len(pairs) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
	}
	rt := &route{key: key}
	return context.WithValue(ctx, pickCtx{}, rt), rt, nil
}

// again reports whether a failed attempt is retried: its status carries a
// tenure refusal whose kind the refusal table says is retryable (whose
// hint rt keeps for the next pick, and weighs as news, follow.Progress),
// or is codes.Unavailable without one (the owner could not be reached or
// is going away), or the attempt was cut off by AttemptTimeout, while ctx
// lasts. The address the attempt was
// sent to is kept as the one that refused.
func (c *Client) again(ctx context.Context, rt *route, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	ref := RefusalOf(err)
	switch {
	case ref != nil && !retryable(ref):
		return false
	case ref == nil && status.Code(err) != codes.Unavailable && !errors.Is(err, router.ErrAttemptTimeout):
		return false
	}
	rt.hint = hintOf(ref)
	tried := rt.tried()
	rt.refused = tried.Addr
	rt.now = rt.seen.News(tried, rt.hint)
	return true
}

// wait waits before attempt+1 of a call, or returns the error that ends
// the call: ErrRetriesExhausted after the last attempt, or ctx's. When the
// last refusal's hint was news, the next attempt goes at once; otherwise
// it waits the Backoff's delay, cut short when the connection's view of
// the partition moves away from where the last attempt went
// (follow.Wait).
func (c *Client) wait(ctx context.Context, method string, rt *route, attempt int, last error) error {
	if attempt >= c.cfg.Backoff.MaxAttempts {
		return fmt.Errorf("%w: %s key %q: %d attempts: %w", ErrRetriesExhausted, method, rt.key, attempt, last)
	}
	if errors.Is(last, router.ErrAttemptTimeout) {
		c.log.Debug("attempt had no answer in time; retrying", "method", method, "key", rt.key, "attempt", attempt, "error", last)
	} else {
		c.log.Debug("call refused; retrying", "method", method, "key", rt.key, "attempt", attempt, "at_once", rt.now, "error", last)
	}
	var err error
	switch pk := rt.picked.Load(); {
	case rt.now:
		err = ctx.Err()
	case pk == nil: // no attempt was sent: nothing to follow
		err = c.cfg.policy().Wait(ctx, c.cfg.Clock, attempt)
	default:
		err = follow.Wait(ctx, c.cfg.Clock, c.cfg.policy().Next(attempt), pk.view.obs, pk.route)
	}
	if err != nil {
		return status.FromContextError(err).Err()
	}
	c.retries.Add(1)
	return nil
}

// record counts a call that made attempts and ended with err.
func (c *Client) record(attempts int, err error) {
	switch {
	case err != nil:
		c.failed.Add(1)
	case attempts > 1:
		c.retried.Add(1)
	default:
		c.ok.Add(1)
	}
}

// idempotencyKeys makes the idempotency keys of a Client's calls: a
// random prefix of 130 bits drawn once per Client (crypto/rand.Text), a
// dot, and a counter in base 36. Keys are unique across the Client's
// calls, and across processes and restarts as long as the prefixes are,
// while a call pays an atomic add and one string instead of a draw of
// randomness.
type idempotencyKeys struct {
	prefix string
	seq    atomic.Uint64
}

// next returns a key no earlier call of the Client had.
func (k *idempotencyKeys) next() string {
	var b [48]byte
	buf := append(b[:0], k.prefix...)
	buf = append(buf, '.')
	return string(strconv.AppendUint(buf, k.seq.Add(1), 36))
}
