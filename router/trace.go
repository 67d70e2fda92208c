package router

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/spans"
)

// Tracing: with Config.TracerProvider (ClientConfig.TracerProvider) set,
// the router opens these spans (attributes tenure.partition, tenure.epoch:
// the token's epoch, or the one the Client's route names; tenure.attempt;
// events "refused", with tenure.refusal, and "retry", with tenure.reason):
//
//	span                   kind      what
//	tenure.router.do       internal  one call of Router.Do
//	tenure.router.attempt  internal  one run of Do's fn under a token
//	tenure.router.serve    server    one request to Handler: served here (tenure.epoch), forwarded (event "forward", tenure.owner) or refused
//	tenure.client.do       client    one call of Client.Do
//	tenure.client.attempt  client    one attempt of it, sent to one node (tenure.owner: its address)
//
// Trace context travels in the W3C traceparent header: a Client attempt
// and a forward carry the span that sent them, and Handler continues the
// trace a request carries. The header only names a parent span; nothing
// is admitted on its strength.

// Span names of the router package: their one home.
const (
	spanDo            = "tenure.router.do"
	spanAttempt       = "tenure.router.attempt"
	spanServe         = "tenure.router.serve"
	spanClientDo      = "tenure.client.do"
	spanClientAttempt = "tenure.client.attempt"
	tracerScope       = "github.com/tenure-go/tenure/router"
)

// refusalOf names a Router's refusal of a call, for the event "refused".
func refusalOf(err error) attribute.KeyValue {
	switch {
	case errors.Is(err, ownership.ErrNotOwner):
		return spans.Refusal.String("not-owner")
	case errors.Is(err, ErrClosed):
		return spans.Refusal.String("closed")
	}
	return spans.Refusal.String("unavailable")
}

// startServe opens the span of a request to a Handler, continuing the
// trace the request carries, and returns the request with it.
func (r *Router) startServe(req *http.Request) (*http.Request, trace.Span) {
	if r.trace == nil {
		return req, nil
	}
	ctx, sp := r.trace.Start(r.trace.Extract(req.Context(), propagation.HeaderCarrier(req.Header)), spanServe, trace.SpanKindServer)
	return req.WithContext(ctx), sp
}

// refused records on sp the refusal a Handler answers.
func refused(sp trace.Span, ref *httpfence.Refusal) {
	spans.Event(sp, spans.EventRefused, spans.Refusal.String(string(ref.Kind)))
}

// startAttempt opens the span of one attempt of Client.Do, sent to route.
func (c *Client) startAttempt(ctx context.Context, route fleet.Route, n int) (context.Context, trace.Span) {
	if c.trace == nil {
		return ctx, nil
	}
	return c.trace.Start(ctx, spanClientAttempt, trace.SpanKindClient, spans.Partition.Int(route.Partition),
		spans.Epoch.Int64(route.Epoch), spans.Attempt.Int(n), spans.Owner.String(route.Addr))
}

// startDoAttempt opens the span of attempt n of Do, run under h.
func (r *Router) startDoAttempt(ctx context.Context, h ownership.Held, n int) (context.Context, trace.Span) {
	if r.trace == nil {
		return ctx, nil
	}
	return r.trace.Start(ctx, spanAttempt, trace.SpanKindInternal,
		spans.Partition.Int(h.Partition), spans.Epoch.Int64(h.Token.Epoch), spans.Attempt.Int(n))
}
