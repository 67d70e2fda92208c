package balance

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// ended is a span processor that signals the spans that end, as long as
// its buffer has room.
type ended chan sdktrace.ReadOnlySpan

func (e ended) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e ended) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case e <- s:
	default: // the test reads the first only
	}
}
func (e ended) Shutdown(context.Context) error   { return nil }
func (e ended) ForceFlush(context.Context) error { return nil }

// TestTracePass: each pass of a running balancer is a span with its
// term's epoch and the revision it planned from.
func TestTracePass(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name, parts = "balance-trace", 16
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNode(t, ctx, cli, name, "n0", 1, ring.Config{Partitions: parts, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted})
	require.NoError(t, fleettest.WaitFor(30*time.Second, func() error { return liveStable([]*liveNode{n}) }, n.Changed))

	done := make(ended, 64)
	tp, _ := testsupport.Tracing(t, sdktrace.WithSpanProcessor(done))
	e := newCandidate(t, ctx, cli, name, "")
	b, err := NewBalancer(cli, Config{Cluster: name, Interval: 10 * time.Millisecond, TracerProvider: tp})
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = b.Run(rctx, e) }()
	var pass sdktrace.ReadOnlySpan
	select {
	case pass = <-done:
	case <-ctx.Done():
		t.Fatal("no pass traced")
	}
	stop()
	<-ran
	assert.Equal(t, spanPass, pass.Name())
	got := map[string]string{}
	for _, a := range pass.Attributes() {
		got[string(a.Key)] = a.Value.Emit()
	}
	epoch, err := strconv.ParseInt(got[string(attrEpoch)], 10, 64)
	require.NoError(t, err)
	assert.Positive(t, epoch, "the term's epoch")
	rev, err := strconv.ParseInt(got[string(attrRevision)], 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, epoch, "planned from a snapshot at or after the term began")
	assert.Equal(t, "0", got[string(attrMoves)], "one node: nothing to move")
}
