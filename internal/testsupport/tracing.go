// Tracing: Tracing, SpansNamed, SpanAttr and EventsNamed record the spans
// of a test's TracerProvider in memory and read them back.

package testsupport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Tracing returns a TracerProvider that records every span, as it ends,
// in the returned exporter; opts add to its options (a span processor of
// the test's own). It is shut down when the test ends.
func Tracing(t testing.TB, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}, opts...)...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// SpansNamed returns the spans recorded in exp named name, in the order
// they ended.
func SpansNamed(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// SpanAttr returns the value of the attribute k among attrs as text, ""
// if there is none.
func SpanAttr(attrs []attribute.KeyValue, k string) string {
	for _, a := range attrs {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}

// EventsNamed returns the events of s named name, in order.
func EventsNamed(s tracetest.SpanStub, name string) []sdktrace.Event {
	var out []sdktrace.Event
	for _, e := range s.Events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}
