package fleet

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/keys"
)

// Tracing: with OperatorConfig.TracerProvider set, a Resize is one span,
// tenure.resize (attributes tenure.resize.id, tenure.resize.from,
// tenure.resize.to), and each step it writes is a child span,
// tenure.resize.step, from the step's start to etcd's answer: the
// attribute tenure.resize.step names it (start, abort, moving: groups
// asked to move, with tenure.resize.groups, or complete), and a step
// that fails is marked as an error with its cause.

// Span names and attribute keys of the fleet package: their one home.
const (
	spanResize     = "tenure.resize"
	spanResizeStep = "tenure.resize.step"
	attrResizeID   = attribute.Key("tenure.resize.id")
	attrResizeFrom = attribute.Key("tenure.resize.from")
	attrResizeTo   = attribute.Key("tenure.resize.to")
	attrStep       = attribute.Key("tenure.resize.step")
	attrGroups     = attribute.Key("tenure.resize.groups")
	tracerScope    = "github.com/tenure-go/tenure/ownership/fleet"
)

// startResize opens the span of a Resize to the count to; nil without a
// provider.
func (o *Operator) startResize(ctx context.Context, to int) (context.Context, trace.Span) {
	if o.tp == nil {
		return ctx, nil
	}
	return o.tp.Tracer(tracerScope).Start(ctx, spanResize, trace.WithAttributes(attrResizeTo.Int(to)))
}

// startStep opens the span of the step name of the resize rs, under ctx's
// span (the Resize's); nil without a provider.
func (d *driver) startStep(ctx context.Context, rs *keys.Resize, name string, attrs ...attribute.KeyValue) trace.Span {
	if d.o.tp == nil {
		return nil
	}
	trace.SpanFromContext(ctx).SetAttributes(attrResizeID.String(rs.ID), attrResizeFrom.Int(rs.From), attrResizeTo.Int(rs.To))
	_, sp := d.o.tp.Tracer(tracerScope).Start(ctx, spanResizeStep, trace.WithAttributes(append(attrs, attrStep.String(name), attrResizeID.String(rs.ID))...))
	return sp
}

// endSpan ends sp (nil: nothing), failed if err is not nil.
func endSpan(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}
