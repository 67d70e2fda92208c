package grpcroute

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/router/internal/admit"
	"github.com/tenure-go/tenure/router/internal/spans"
)

// Server admits the calls of one node of a fleet: a call whose key's
// partition the node owns runs, held like router.Router.Do's work; any
// other call is refused with a status that names the owner (see
// refusal.go). Install its interceptors with ServerOptions, or Unary and
// Stream. A Server is safe for concurrent use by multiple goroutines.
type Server struct {
	node    router.Node
	id      string
	cfg     ServerConfig
	log     hclog.Logger
	closed  atomic.Bool
	served  atomic.Int64
	refused atomic.Int64
	metrics *metrics.Set  // nil without ServerConfig.Metrics
	trace   *spans.Tracer // nil without ServerConfig.TracerProvider
}

// ServerStats counts what a Server did with the calls it routed.
type ServerStats struct {
	// Served is the number of calls admitted and run on this node.
	Served int64
	// Refused is the number of calls refused with a tenure refusal:
	// before they ran (not the owner, handoff, session lost) or because
	// their handler reported the end of its tenure (those also count as
	// Served). Calls without a usable key are not counted.
	Refused int64
}

// NewServer returns the Server of node (an *ownership.Node will do). The
// node's lifetime is the caller's. It returns an error wrapping
// ErrNilArgument if node is nil, ErrInvalidConfig if cfg does not
// validate, or ErrMetrics.
func NewServer(node router.Node, cfg ServerConfig) (*Server, error) {
	if nilness.Is(node) {
		return nil, fmt.Errorf("%w: node", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{node: node, id: node.ID(), cfg: cfg, log: cfg.Logger, trace: spans.New(cfg.TracerProvider, tracerScope)}
	var err error
	if s.metrics, err = registerServerMetrics(cfg.Metrics, s); err != nil {
		return nil, err
	}
	return s, nil
}

// ServerOptions returns the options that install the Server's unary and
// stream interceptors on a grpc.Server, ahead of any others given later.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream)}
}

// Stats returns the Server's counters. It takes no lock.
func (s *Server) Stats() ServerStats {
	return ServerStats{Served: s.served.Load(), Refused: s.refused.Load()}
}

// Close stops admitting calls: every routed call is refused with
// SESSION_LOST from then on. Calls running go on. Close unregisters the
// metrics and is idempotent.
func (s *Server) Close() {
	s.closed.Store(true)
	s.metrics.Unregister()
}

// Unary is the Server's grpc.UnaryServerInterceptor. It takes the call's
// key (ServerConfig.Key, which any MetadataKey metadata must agree with,
// or the MetadataKey metadata) and, if this node
// owns the key's partition, runs handler counted as in flight (a handoff
// of the partition drains it first) under a context that carries the
// partition's fencing token (fence.FromContext) and the key
// (KeyFromContext), and ends when the call ends or the tenure ends. A partition in handoff is waited for up to
// ServerConfig.HandoffWait. Otherwise the call is refused with a status
// naming the owner. A handler's error that reports the end of its tenure
// (a write refused by fence.ErrStale, work cut short by a move or a lost
// session: ownership.Ended), or etcd unavailable, becomes the matching
// retryable refusal, as router.WriteError answers it over HTTP; any other
// error is returned unchanged. A call without a usable key fails with
// codes.InvalidArgument.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.cfg.Routed != nil && !s.cfg.Routed(info.FullMethod) {
		return handler(ctx, req)
	}
	key, err := s.key(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	ctx, sp := s.startServe(ctx, info.FullMethod)
	c, err := s.enter(ctx, key)
	if err != nil {
		endServe(sp, err)
		return nil, err
	}
	defer c.leave()
	resp, err := handler(c.ctx, req)
	err = s.result(ctx, c, key, err)
	endServe(sp, err)
	return resp, err
}

// stream is the Server's grpc.StreamServerInterceptor: unary for a
// streaming call, whose key is always its MetadataKey metadata. The
// handler's stream's Context is the work's context.
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if s.cfg.Routed != nil && !s.cfg.Routed(info.FullMethod) {
		return handler(srv, ss)
	}
	ctx := ss.Context()
	key, err := keyOfMetadata(metadata.ValueFromIncomingContext(ctx, MetadataKey))
	if err != nil {
		return err
	}
	ctx, sp := s.startServe(ctx, info.FullMethod)
	c, err := s.enter(ctx, key)
	if err != nil {
		endServe(sp, err)
		return err
	}
	defer c.leave()
	err = s.result(ctx, c, key, handler(srv, &workStream{ServerStream: ss, ctx: c.ctx}))
	endServe(sp, err)
	return err
}

// key returns the routing key of a unary call.
func (s *Server) key(ctx context.Context, method string, req any) (string, error) {
	if s.cfg.Key == nil {
		return keyOfMetadata(metadata.ValueFromIncomingContext(ctx, MetadataKey))
	}
	key, err := s.cfg.Key(ctx, method, req)
	if err != nil {
		return "", userKeyError(err)
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	if vs := metadata.ValueFromIncomingContext(ctx, MetadataKey); len(vs) > 1 || len(vs) == 1 && vs[0] != key {
		return "", &keyError{fmt.Errorf("%w: the %q metadata (%d values) does not name the request's key", ErrInvalidKey, MetadataKey, len(vs))}
	}
	return key, nil
}

// call is a call a Server admitted: the hold of its key's partition and
// the context its handler runs under.
type call struct {
	held ownership.Held
	ctx  *admit.Work
}

// enter admits a call for key if this node owns it, as Unary describes,
// or returns the refusal. The caller runs the handler under the call's
// context, then hands its error to result and calls leave.
func (s *Server) enter(ctx context.Context, key string) (call, error) {
	if s.closed.Load() {
		s.refused.Add(1)
		kind := admit.Decide(admit.Situation{Self: s.id, Closed: true})
		return call{}, statusOf(refusal.New("grpcroute", kind, s.id, nil, "the server is closed"))
	}
	held, hint, err := s.hold(ctx, key)
	if err != nil {
		s.refused.Add(1)
		ref := s.refuse(ctx, hint, err)
		if s.log.IsTrace() {
			p := ref.Proto()
			s.log.Trace("refused", "key", key, "kind", p.GetKind().String(), "owner", p.GetOwner())
		}
		return call{}, statusOf(ref)
	}
	s.served.Add(1)
	if s.trace != nil {
		spans.Set(trace.SpanFromContext(ctx), spans.Partition.Int(held.Partition), spans.Epoch.Int64(held.Token.Epoch))
	}
	return call{held: held, ctx: admit.WorkContext(ctx, held, servedKey{}, key)}, nil
}

// leave ends an admitted call: its work context, then its hold.
func (c call) leave() {
	c.ctx.Release()
	c.held.Release()
}

// result returns what the caller of an admitted call for key receives
// for its handler's error err: err, or the retryable refusal that
// admit.Decide chooses for it (the end of the call's tenure, etcd
// unavailable) when the kind has a gRPC form.
func (s *Server) result(ctx context.Context, c call, key string, err error) error {
	if err == nil {
		return nil
	}
	kind := admit.Decide(admit.Situation{Self: s.id, Caller: ctx, Err: err, Work: c.ctx})
	row, ok := refusal.Lookup(kind)
	if !ok || row.Proto == tenurepb.Refusal_KIND_UNSPECIFIED {
		return err // the handler's own error, or a refusal the gRPC wire does not carry
	}
	s.refused.Add(1)
	ref := refusal.New("grpcroute", kind, s.id, admit.HintOf(&ownership.WrongOwnerError{Route: s.node.Lookup(key)}), err.Error())
	ref.SetToken(err)
	s.log.Debug("handler reports the end of its tenure; refusing for a retry", "key", key, "kind", row.Proto.String(), "error", err)
	return statusOf(ref)
}

// refuse returns the refusal of a call that hold did not admit, given its
// hint we and error err: admit.Decide's kind, as router.Handler answers a
// request forwarded to it (a gRPC call is never forwarded).
func (s *Server) refuse(ctx context.Context, we *ownership.WrongOwnerError, err error) refusal.Refusal {
	kind := admit.Decide(admit.Situation{Self: s.id, Caller: ctx, Err: err, Hint: we})
	cause := ""
	if kind == refusal.SessionLost {
		cause = err.Error() // the node's own words for its end
	}
	return refusal.New("grpcroute", kind, s.id, admit.HintOf(we), cause)
}

// workStream is a server stream whose Context is the work's.
type workStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *workStream) Context() context.Context { return w.ctx }
