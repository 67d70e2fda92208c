package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTraceClientRetry: a real routed retry through router.Client. The
// owner's handler answers the first attempt with a stale refusal (its
// store refused the write); the Client's span has one attempt refused
// (event "refused", kind stale) and one served, a "retry" event between
// them, and each attempt names the partition and the epoch it was sent
// under; the owner's Handler continues the Client's trace.
func TestTraceClientRetry(t *testing.T) {
	etcd := cluster.New(t, 1)
	tp, exp := testsupport.Tracing(t)
	var calls atomic.Int64
	f := newFleet(t, etcd, "traceretry", fleetOptions{Router: router.Config{TracerProvider: tp}, Handler: func(m *member) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, _ := fence.FromContext(r.Context())
			if calls.Add(1) == 1 {
				router.WriteError(w, r, fmt.Errorf("store: %w", &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: tok.Epoch + 1}))
				return
			}
			_, _ = io.WriteString(w, "ok")
		})
	}})
	a := f.start("a")
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "traceretry", TracerProvider: tp})
	waitClientAgrees(t, c, f)

	resp, err := postVia(context.Background(), c, "k1", "/k/k1", "text/plain", []byte("x"))
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	route := a.node.Lookup("k1")

	do := testsupport.SpansNamed(exp, "tenure.client.do")
	require.Len(t, do, 1)
	attempts := testsupport.SpansNamed(exp, "tenure.client.attempt")
	require.Len(t, attempts, 2)
	require.Len(t, testsupport.EventsNamed(do[0], "retry"), 1, "one retry")
	refused := testsupport.EventsNamed(attempts[0], "refused")
	require.Len(t, refused, 1, "the first attempt was refused")
	assert.Equal(t, "stale", testsupport.SpanAttr(refused[0].Attributes, "tenure.refusal"))
	assert.Empty(t, testsupport.EventsNamed(attempts[1], "refused"), "the second was served")
	for i, s := range attempts {
		assert.Equal(t, do[0].SpanContext.SpanID(), s.Parent.SpanID(), "attempt %d is the call's", i)
		assert.Equal(t, strconv.FormatInt(route.Epoch, 10), testsupport.SpanAttr(s.Attributes, "tenure.epoch"), "attempt %d", i)
		assert.Equal(t, strconv.Itoa(route.Partition), testsupport.SpanAttr(s.Attributes, "tenure.partition"), "attempt %d", i)
	}
	serves := testsupport.SpansNamed(exp, "tenure.router.serve")
	require.Len(t, serves, 2)
	for i, s := range serves {
		assert.Equal(t, attempts[i].SpanContext.SpanID(), s.Parent.SpanID(), "the owner continues attempt %d's trace", i)
		assert.Equal(t, do[0].SpanContext.TraceID(), s.SpanContext.TraceID())
		assert.Equal(t, strconv.FormatInt(route.Epoch, 10), testsupport.SpanAttr(s.Attributes, "tenure.epoch"))
	}
}

// TestTraceForward: a request sent to a node that does not own its key,
// carrying a traceparent, is forwarded to the owner; the owner's span is
// a child of the forwarding node's, which is a child of the caller's.
func TestTraceForward(t *testing.T) {
	etcd := cluster.New(t, 1)
	tp, exp := testsupport.Tracing(t)
	f := newFleet(t, etcd, "traceforward", fleetOptions{Router: router.Config{TracerProvider: tp}})
	f.start("a")
	f.start("b")
	f.waitStable()
	key := keyOwnedBy(t, f.get("a"), "tf")
	via := f.nonOwner(key)

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+via.addr+"/k/"+key, nil)
	require.NoError(t, err)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := newHTTPClient(t).Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	caller.End()
	require.Equal(t, "ok", string(body))

	serves := testsupport.SpansNamed(exp, "tenure.router.serve")
	require.Len(t, serves, 2)
	var fwd, owner tracetest.SpanStub
	for _, s := range serves {
		if len(testsupport.EventsNamed(s, "forward")) > 0 {
			fwd = s
		} else {
			owner = s
		}
	}
	require.NotEmpty(t, fwd.Name, "the non-owner forwarded")
	assert.Equal(t, "a", testsupport.SpanAttr(testsupport.EventsNamed(fwd, "forward")[0].Attributes, "tenure.owner"))
	assert.Equal(t, caller.SpanContext().SpanID(), fwd.Parent.SpanID(), "the forwarding node continues the caller's trace")
	assert.Equal(t, fwd.SpanContext.SpanID(), owner.Parent.SpanID(), "the owner continues the forward's")
	assert.Equal(t, caller.SpanContext().TraceID(), owner.SpanContext.TraceID())
	assert.Equal(t, strconv.FormatInt(f.get("a").node.Lookup(key).Epoch, 10), testsupport.SpanAttr(owner.Attributes, "tenure.epoch"))
}

// TestTraceDoRetry: work that reports the end of its tenure is run again
// by Router.Do; its span has two attempts, each under the token's epoch,
// and a "retry" event.
func TestTraceDoRetry(t *testing.T) {
	etcd := cluster.New(t, 1)
	tp, exp := testsupport.Tracing(t)
	f := newFleet(t, etcd, "tracedo", fleetOptions{Partitions: 4})
	m := f.start("solo")
	f.waitStable()
	r, err := router.New(m.node, router.Config{TracerProvider: tp, Backoff: router.Backoff{MaxAttempts: 3, Initial: time.Millisecond, Max: time.Millisecond}})
	require.NoError(t, err)
	defer r.Close()
	runs := 0
	require.NoError(t, r.Do(context.Background(), "k", func(context.Context, fence.Token) error {
		if runs++; runs == 1 {
			return fmt.Errorf("store: %w", ownership.ErrMoved)
		}
		return nil
	}))
	do := testsupport.SpansNamed(exp, "tenure.router.do")
	require.Len(t, do, 1)
	assert.Len(t, testsupport.EventsNamed(do[0], "retry"), 1)
	attempts := testsupport.SpansNamed(exp, "tenure.router.attempt")
	require.Len(t, attempts, 2)
	for _, s := range attempts {
		assert.Equal(t, strconv.FormatInt(m.node.Lookup("k").Epoch, 10), testsupport.SpanAttr(s.Attributes, "tenure.epoch"))
		assert.Equal(t, do[0].SpanContext.SpanID(), s.Parent.SpanID())
	}
}
