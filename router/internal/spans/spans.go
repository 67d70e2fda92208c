// Package spans opens the OpenTelemetry spans of routed calls for the
// router and grpcroute, and carries their trace context across a hop in
// the W3C trace-context format (propagation.TraceContext, fixed: the
// router and grpcroute speak one format, and no global propagator is
// read). A nil *Tracer (no TracerProvider configured) opens no span and
// costs a nil check.
package spans

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys shared by the router and grpcroute.
const (
	Partition = attribute.Key("tenure.partition")
	Epoch     = attribute.Key("tenure.epoch")
	Attempt   = attribute.Key("tenure.attempt")
	Owner     = attribute.Key("tenure.owner")
	Refusal   = attribute.Key("tenure.refusal")
	Node      = attribute.Key("tenure.node")
	Reason    = attribute.Key("tenure.reason")
)

// Event names shared by the router and grpcroute.
const (
	EventRefused = "refused" // a node refused the attempt (attribute tenure.refusal: its kind)
	EventRetry   = "retry"   // the call goes on with another attempt (tenure.reason: why)
	EventForward = "forward" // the call is forwarded to its owner (tenure.owner)
)

// Tracer opens spans with one TracerProvider's tracer. It is safe for
// concurrent use.
type Tracer struct{ t trace.Tracer }

// New returns a Tracer of tp for the instrumentation scope name, nil if
// tp is nil.
func New(tp trace.TracerProvider, scope string) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer(scope)}
}

// Start opens span name as a child of ctx's span. A nil t returns ctx and
// a nil span, which the other functions of the package accept.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End ends sp (nil: nothing), marking it failed with err if err is not nil.
func End(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// Event adds the event name to sp (nil: nothing).
func Event(sp trace.Span, name string, attrs ...attribute.KeyValue) {
	if sp != nil {
		sp.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// Set sets attributes on sp (nil: nothing).
func Set(sp trace.Span, attrs ...attribute.KeyValue) {
	if sp != nil {
		sp.SetAttributes(attrs...)
	}
}

var format propagation.TraceContext

// Inject writes the trace context of ctx's span into c, if t is not nil
// (a call without a provider sends none of its own).
func (t *Tracer) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if t != nil {
		format.Inject(ctx, c)
	}
}

// Extract returns ctx with the remote span context that c carries, if t
// is not nil and c carries a valid one; ctx otherwise. A malformed header
// is ignored: it only ever names a parent, never admits anything.
func (t *Tracer) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if t == nil {
		return ctx
	}
	return format.Extract(ctx, c)
}
