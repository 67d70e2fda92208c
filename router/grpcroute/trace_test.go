package grpcroute_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTraceRetry: a real routed retry over gRPC. The owner's store
// refuses the first write as stale, the Server answers with a retryable
// STALE refusal and the Client retries: the call's span has a "retry"
// event, its first attempt a "refused" event, both attempts the
// partition and the epoch, and the Server's span of each attempt
// continues the attempt's trace across gRPC.
func TestTraceRetry(t *testing.T) {
	f, exp, counter, _ := refusingOnce(t, "traceretry", func(ctx context.Context) error {
		tok, _ := fence.FromContext(ctx)
		return fmt.Errorf("store: %w", &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: tok.Epoch + 1})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: "k", Delta: 1})
	require.NoError(t, err)
	owner := f.owner("k")
	route := owner.node.Lookup("k")
	require.Equal(t, route.Epoch, reply.Epoch)

	call := testsupport.SpansNamed(exp, "tenure.grpc.call")
	require.Len(t, call, 1)
	require.Len(t, testsupport.EventsNamed(call[0], "retry"), 1)
	attempts := testsupport.SpansNamed(exp, "tenure.grpc.attempt")
	require.Len(t, attempts, 2)
	refused := testsupport.EventsNamed(attempts[0], "refused")
	require.Len(t, refused, 1)
	assert.Equal(t, "stale", testsupport.SpanAttr(refused[0].Attributes, "tenure.refusal"))
	serves := testsupport.SpansNamed(exp, "tenure.grpc.serve")
	require.Len(t, serves, 2)
	for i, a := range attempts {
		assert.Equal(t, call[0].SpanContext.SpanID(), a.Parent.SpanID())
		assert.Equal(t, strconv.FormatInt(route.Epoch, 10), testsupport.SpanAttr(a.Attributes, "tenure.epoch"), "attempt %d", i)
		assert.Equal(t, strconv.Itoa(route.Partition), testsupport.SpanAttr(a.Attributes, "tenure.partition"), "attempt %d", i)
		assert.Equal(t, owner.addr, testsupport.SpanAttr(a.Attributes, "tenure.owner"), "attempt %d", i)
		assert.Equal(t, a.SpanContext.SpanID(), serves[i].Parent.SpanID(), "the Server continues attempt %d's trace", i)
		assert.Equal(t, a.SpanContext.TraceID(), serves[i].SpanContext.TraceID())
		assert.Equal(t, strconv.FormatInt(route.Epoch, 10), testsupport.SpanAttr(serves[i].Attributes, "tenure.epoch"))
	}
	assert.Len(t, testsupport.EventsNamed(serves[0], "refused"), 1, "the Server's span says it refused")
}

// TestRetryEtcdUnavailable: the gRPC twin of router's
// TestWriteErrorUnavailable, on a real fleet. The owner's store fails the
// first write with etcd's answer to a proposal its raft dropped while
// leadership moved (code Unknown, "raft proposal dropped"); the Server
// answers with the retryable UNAVAILABLE refusal and the Client sends the
// call again, which succeeds: the caller sees no error.
func TestRetryEtcdUnavailable(t *testing.T) {
	_, exp, counter, calls := refusingOnce(t, "retryunavailable", func(context.Context) error {
		return fmt.Errorf("etcdfence: commit of 1 writes: %w", status.Error(codes.Unknown, "raft proposal dropped"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := counter.Add(ctx, &counterpb.AddRequest{Key: "k", Delta: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(2), calls.Load(), "the store's calls")
	attempts := testsupport.SpansNamed(exp, "tenure.grpc.attempt")
	require.Len(t, attempts, 2)
	refused := testsupport.EventsNamed(attempts[0], "refused")
	require.Len(t, refused, 1)
	assert.Equal(t, "unavailable", testsupport.SpanAttr(refused[0].Attributes, "tenure.refusal"))
}

// refusingOnce starts a traced fleet of nodes a and b, named name, whose
// store fails its first write with first's error and takes the others,
// and a traced Client of it. It returns the fleet, the spans' exporter,
// the Client's counter service and the count of the store's writes.
func refusingOnce(t *testing.T, name string, first func(context.Context) error) (*testFleet, *tracetest.InMemoryExporter, counterpb.CounterClient, *atomic.Int64) {
	t.Helper()
	etcd := cluster.New(t, 1)
	tp, exp := testsupport.Tracing(t)
	f := newFleet(t, etcd, name, false)
	f.tracing = tp
	calls := new(atomic.Int64)
	f.store.refuse = func(ctx context.Context, key string) error {
		if calls.Add(1) > 1 {
			return nil
		}
		return first(ctx)
	}
	f.startStable("a", "b")
	_, counter := newClient(t, f.cli, name, grpcroute.ClientConfig{TracerProvider: tp})
	return f, exp, counter, calls
}
