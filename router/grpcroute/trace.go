package grpcroute

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/router/internal/spans"
)

// Tracing: with ClientConfig.TracerProvider (ServerConfig.TracerProvider)
// set, grpcroute opens these spans (attributes tenure.partition,
// tenure.epoch: the token's epoch on the server, the one the picked
// route names on the client; tenure.attempt; tenure.owner: the address
// an attempt went to; events "refused", with tenure.refusal, the
// refusal table's word for its kind, as over HTTP, and "retry", with tenure.reason):
//
//	span                 kind    what
//	tenure.grpc.call     client  one unary call through the Client's interceptor
//	tenure.grpc.attempt  client  one attempt of it
//	tenure.grpc.serve    server  one routed call to the Server's interceptors: admitted (tenure.epoch) or refused
//
// Each attempt carries its trace context in the W3C traceparent
// metadata, and the Server continues the trace a call carries; a
// streaming call carries its caller's trace context on every attempt
// (no client span of its own). The metadata only names a parent span;
// nothing is admitted on its strength.

// Span names of grpcroute: their one home.
const (
	spanCall    = "tenure.grpc.call"
	spanAttempt = "tenure.grpc.attempt"
	spanServe   = "tenure.grpc.serve"
	tracerScope = "github.com/tenure-go/tenure/router/grpcroute"
)

// mdCarrier carries a trace context in gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if vs := metadata.MD(c).Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, strings.ToLower(k))
	}
	return out
}

// withTrace returns ctx with the trace context of its span in its
// outgoing metadata (replacing any the caller set), if the Client traces.
func (c *Client) withTrace(ctx context.Context) context.Context {
	if c.trace == nil {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	c.trace.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// endAttempt ends sp, the span of an attempt of rt that ended with err.
func endAttempt(sp trace.Span, rt *route, err error) {
	if sp == nil {
		return
	}
	r := rt.tried()
	spans.Set(sp, spans.Partition.Int(r.Partition), spans.Epoch.Int64(r.Epoch), spans.Owner.String(r.Addr))
	if ref := RefusalOf(err); ref != nil {
		spans.Event(sp, spans.EventRefused, refusalWord(ref))
	}
	spans.End(sp, err)
}

// startServe opens the span of a routed call to the Server, continuing
// the trace its metadata carries.
func (s *Server) startServe(ctx context.Context, method string) (context.Context, trace.Span) {
	if s.trace == nil {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return s.trace.Start(s.trace.Extract(ctx, mdCarrier(md)), spanServe, trace.SpanKindServer, rpcMethod.String(method))
}

// endServe ends sp, the span of a routed call that ended with err: a
// refusal is an event.
func endServe(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if ref := RefusalOf(err); ref != nil {
		spans.Event(sp, spans.EventRefused, refusalWord(ref))
	}
	spans.End(sp, err)
}

// refusalWord returns the attribute that names ref's kind by the
// refusal table's word, as the router names its HTTP refusals.
func refusalWord(ref *tenurepb.Refusal) attribute.KeyValue {
	if row, ok := refusal.ByProto(ref.GetKind()); ok {
		return spans.Refusal.String(string(row.Kind))
	}
	return spans.Refusal.String(ref.GetKind().String())
}

// rpcMethod is the attribute of the method a span's call named.
const rpcMethod = attribute.Key("rpc.method")
