package router_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTraceDeploy traces one deploy of a fleet of two nodes (a and b,
// two partitions, a preparation on every move): a rolling restart, a
// left and rejoined, then b, with a call routed through a router.Client
// after each step. Each planned move is one trace, with the holder's
// phases and the successor's; each call is one trace, from the Client to
// the node that served it. With -v it prints the traces as a tree, the
// one README.md's "Tracing" section shows:
//
//	go test -count=1 -run TestTraceDeploy -v ./router
func TestTraceDeploy(t *testing.T) {
	etcd := cluster.New(t, 1)
	tp, exp := testsupport.Tracing(t)
	f := newFleet(t, etcd, "deploy", fleetOptions{
		Partitions: 4,
		Router:     router.Config{TracerProvider: tp},
		Callbacks:  ownership.Callbacks{OnAcquired: func(ownership.Event) {}, OnPrepare: func(ownership.Event) error { return nil }},
		Tune:       func(_ string, cfg *ownership.Config) { cfg.TracerProvider = tp },
	})
	f.start("a")
	f.start("b")
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "deploy", TracerProvider: tp})
	call := func() {
		waitClientAgrees(t, c, f)
		resp, err := send(context.Background(), c, http.MethodGet, "k", "/k/k", "", nil)
		require.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	exp.Reset() // the fleet's first acquisitions are no deploy
	for _, id := range []string{"a", "b"} {
		f.stopMember(id)
		f.waitStable()
		call()
		f.start(id)
		f.waitStable()
		call()
	}

	traces := traceTrees(exp.GetSpans())
	moves := 0
	for _, tr := range traces {
		var out, in bool
		for _, r := range tr.roots {
			out = out || r.Name == "tenure.move.out"
			in = in || r.Name == "tenure.move.in"
		}
		if out {
			assert.True(t, in, "a move's trace has both sides:\n%s", tr.render())
			moves++
		}
	}
	assert.GreaterOrEqual(t, moves, 4, "each restart moves a partition away and back")
	var b strings.Builder
	for _, tr := range traces {
		b.WriteString(tr.render())
	}
	t.Logf("the traces of one deploy (%d moves):\n%s", moves, b.String())
}

// A traced is one trace: its spans, from the roots (spans whose parent is
// not in it) down.
type traced struct {
	id    trace.TraceID
	start time.Time
	roots []tracetest.SpanStub
	kids  map[trace.SpanID][]tracetest.SpanStub
}

// traceTrees groups spans by trace, in order of their first start.
func traceTrees(spans []tracetest.SpanStub) []*traced {
	byID := map[trace.TraceID]*traced{}
	var out []*traced
	for _, s := range spans {
		tr := byID[s.SpanContext.TraceID()]
		if tr == nil {
			tr = &traced{id: s.SpanContext.TraceID(), start: s.StartTime, kids: map[trace.SpanID][]tracetest.SpanStub{}}
			byID[tr.id] = tr
			out = append(out, tr)
		}
		if s.StartTime.Before(tr.start) {
			tr.start = s.StartTime
		}
	}
	for _, tr := range out {
		in := map[trace.SpanID]bool{}
		for _, s := range spans {
			if s.SpanContext.TraceID() == tr.id {
				in[s.SpanContext.SpanID()] = true
			}
		}
		for _, s := range spans {
			switch {
			case s.SpanContext.TraceID() != tr.id:
			case in[s.Parent.SpanID()]:
				tr.kids[s.Parent.SpanID()] = append(tr.kids[s.Parent.SpanID()], s)
			default:
				tr.roots = append(tr.roots, s)
			}
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	for _, tr := range out {
		slices.SortStableFunc(tr.roots, byStart)
		for _, k := range tr.kids {
			slices.SortStableFunc(k, byStart)
		}
	}
	slices.SortStableFunc(out, func(a, b *traced) int { return a.start.Compare(b.start) })
	return out
}

// shown are the attributes a rendered span shows, in this order.
var shown = []string{"tenure.node", "tenure.partition", "tenure.epoch", "tenure.holder", "tenure.failover.cause", "tenure.attempt", "tenure.refusal"}

// render writes the trace as an indented tree: each span's start after
// the trace's first, its duration, its name and attributes, and its
// events.
func (tr *traced) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s\n", tr.id.String()[:8])
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "  %8s %7s  %s%s", "+"+ms(s.StartTime.Sub(tr.start)), ms(s.EndTime.Sub(s.StartTime)), strings.Repeat("  ", depth), s.Name)
		for _, k := range shown {
			if v := testsupport.SpanAttr(s.Attributes, k); v != "" {
				fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "tenure."), v)
			}
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, " [%s", e.Name)
			if v := cmp.Or(testsupport.SpanAttr(e.Attributes, "tenure.refusal"), testsupport.SpanAttr(e.Attributes, "tenure.owner")); v != "" {
				fmt.Fprintf(&b, " %s", v)
			}
			fmt.Fprintf(&b, " +%s]", ms(e.Time.Sub(tr.start)))
		}
		b.WriteString("\n")
		for _, k := range tr.kids[s.SpanContext.SpanID()] {
			walk(k, depth+1)
		}
	}
	for _, r := range tr.roots {
		walk(r, 0)
	}
	return b.String()
}
