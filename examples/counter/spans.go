package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Recording spans (--trace-file): an OpenTelemetry SDK TracerProvider,
// given to the node and the router, whose exporter appends each finished
// span to a file as one JSON line (spanLine). A batch of spans is written
// off the path of the work that ended them; Shutdown, at exit, writes
// what is left.

// spanLine is one finished span as --trace-file records it.
type spanLine struct {
	Name   string         `json:"name"`
	Trace  string         `json:"trace"`
	Span   string         `json:"span"`
	Parent string         `json:"parent,omitempty"`
	Start  time.Time      `json:"start"`
	End    time.Time      `json:"end"`
	Attrs  map[string]any `json:"attrs,omitempty"`
	Events []spanEvent    `json:"events,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// spanEvent is an event of a spanLine.
type spanEvent struct {
	Name  string         `json:"name"`
	Time  time.Time      `json:"time"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// fileExporter writes spans to a file as JSON lines.
type fileExporter struct {
	mu  sync.Mutex
	f   *os.File // nil once shut down
	w   *bufio.Writer
	enc *json.Encoder
}

// ExportSpans writes spans, one JSON line each.
func (e *fileExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return errors.New("--trace-file: closed")
	}
	for _, s := range spans {
		l := spanLine{
			Name: s.Name(), Trace: s.SpanContext().TraceID().String(), Span: s.SpanContext().SpanID().String(),
			Start: s.StartTime(), End: s.EndTime(), Attrs: attrMap(s.Attributes()),
		}
		if s.Parent().IsValid() {
			l.Parent = s.Parent().SpanID().String()
		}
		for _, ev := range s.Events() {
			l.Events = append(l.Events, spanEvent{Name: ev.Name, Time: ev.Time, Attrs: attrMap(ev.Attributes)})
		}
		if st := s.Status(); st.Code == codes.Error {
			l.Error = st.Description
		}
		if err := e.enc.Encode(l); err != nil {
			return fmt.Errorf("--trace-file: %w", err)
		}
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("--trace-file: %w", err)
	}
	return nil
}

// Shutdown closes the file.
func (e *fileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return nil
	}
	err := errors.Join(e.w.Flush(), e.f.Close())
	e.f = nil
	return err
}

// attrMap returns attrs by key, their values as Go values.
func attrMap(attrs []attribute.KeyValue) map[string]any {
	if len(attrs) == 0 {
		return nil
	}
	m := make(map[string]any, len(attrs))
	for _, a := range attrs {
		m[string(a.Key)] = a.Value.AsInterface()
	}
	return m
}

// traceQueue bounds the spans waiting to be written; more are dropped.
const traceQueue = 1 << 16

// openTrace returns a TracerProvider that appends every finished span to
// the file at path (created if needed), and its shutdown, which writes the
// spans still queued and closes the file.
func openTrace(path string) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--trace-file: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	exp := &fileExporter{f: f, w: w, enc: json.NewEncoder(w)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp,
		sdktrace.WithMaxQueueSize(traceQueue), sdktrace.WithMaxExportBatchSize(1024), sdktrace.WithBatchTimeout(time.Second)))
	return tp, tp.Shutdown, nil
}
