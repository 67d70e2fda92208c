package ownership

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// spanSet is the spans an exporter holds.
type spanSet []tracetest.SpanStub

// of returns the spans of partition p on node (its roots, and their
// children).
func (s spanSet) of(node string, p int) spanSet {
	var out spanSet
	for _, sp := range s {
		if attrOf(sp, attrPartition) == strconv.Itoa(p) && (attrOf(sp, attrNode) == node || attrOf(sp, attrNode) == "" && s.rootNode(sp) == node) {
			out = append(out, sp)
		}
	}
	return out
}

// rootNode returns the node of sp's parent in s.
func (s spanSet) rootNode(sp tracetest.SpanStub) string {
	for _, r := range s {
		if r.SpanContext.SpanID() == sp.Parent.SpanID() && r.SpanContext.TraceID() == sp.SpanContext.TraceID() {
			return attrOf(r, attrNode)
		}
	}
	return ""
}

func (s spanSet) named(name string) (tracetest.SpanStub, bool) {
	for _, sp := range s {
		if sp.Name == name {
			return sp, true
		}
	}
	return tracetest.SpanStub{}, false
}

// children returns the names of root's children in s, in order of start.
func (s spanSet) children(root tracetest.SpanStub) []string {
	var kids spanSet
	for _, sp := range s {
		if sp.Parent.SpanID() == root.SpanContext.SpanID() && sp.SpanContext.TraceID() == root.SpanContext.TraceID() {
			kids = append(kids, sp)
		}
	}
	slices.SortStableFunc(kids, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	var out []string
	for _, k := range kids {
		out = append(out, k.Name)
	}
	return out
}

func attrOf(sp tracetest.SpanStub, k attribute.Key) string {
	return testsupport.SpanAttr(sp.Attributes, string(k))
}

func hasEvent(sp tracetest.SpanStub, name string) bool {
	return slices.ContainsFunc(sp.Events, func(e sdktrace.Event) bool { return e.Name == name })
}

// TestTraceMove shows the spans of a real planned move on both sides: a
// node joins, a partition moves to it from the holder, which waits for
// the successor's preparation, drains, releases and hands the claim over;
// the successor prepares, claims, raises its fence and starts. Both sides
// are in one trace, derived from the moving claim's epoch. The nodes'
// builds lack the handover feature, so the move deletes its claim and no
// spec write (the feature recorded at a first planned release) races the
// successor's claim.
func TestTraceMove(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "tracemove", 16
	tp, exp := testsupport.Tracing(t)
	cli := c.NewClient(t)
	cfg := func(id string) Config {
		cfg := olderBuild(testConfig(t, name, id, parts), slices.DeleteFunc(slices.Clone(fleetview.Features()), func(f string) bool { return f == fleetview.FeatureHandover })...)
		cfg.TracerProvider = tp
		cfg.Fencers = []fence.Fencer{fleetStore(t, cli, name)}
		cfg.Callbacks = Callbacks{OnAcquired: func(Event) {}, OnPrepare: func(Event) error { return nil }}
		return cfg
	}
	p, old, epoch, out, in := traceJoinMove(t, c, exp, parts, cfg)
	s := spanSet(exp.GetSpans())
	assert.Equal(t, []string{spanPrepare, spanDrain, spanRelease, spanHandover}, s.children(out), "the holder's phases, in order")
	assert.Equal(t, []string{spanPrepare, spanClaim, spanFence, spanStart}, s.children(in), "the successor's phases, in order")
	assert.Equal(t, out.SpanContext.TraceID(), in.SpanContext.TraceID(), "one trace for both sides")
	assert.Equal(t, out.Parent.SpanID(), in.Parent.SpanID(), "one parent derived from the move")
	assert.Equal(t, strconv.FormatInt(old, 10), attrOf(out, attrEpoch))
	assert.Equal(t, strconv.FormatInt(epoch, 10), attrOf(in, attrEpoch))
	assert.Equal(t, "a", attrOf(in, attrHolder))
	assert.True(t, hasEvent(in, eventAdmit), "the successor's root says when it admits")
	prep, _ := s.of("b", p).named(spanPrepare)
	assert.True(t, hasEvent(prep, eventReady))
	fenceSpan, _ := s.of("b", p).named(spanFence)
	assert.Equal(t, strconv.FormatInt(epoch, 10), attrOf(fenceSpan, attrEpoch))
	assert.False(t, out.EndTime.After(in.EndTime), "the holder's hand-over ends before the successor admits")
	handover, _ := s.of("a", p).named(spanHandover)
	rev, err := strconv.ParseInt(attrOf(handover, attrRevision), 10, 64)
	require.NoError(t, err, "the claim's deletion says its revision")
	assert.Less(t, rev, epoch, "deleted, then claimed by the successor: two writes")
	assert.Empty(t, attrOf(handover, attrSuccessor), "deleted, not handed over")
}

// TestTraceHandover shows the spans of a real planned move whose claim is
// handed over: the fleet's spec requires the handover feature before the
// first node joins, so every planned move hands over and no spec write
// races one. The holder waits for the successor's preparation, drains,
// releases and hands the claim over in one transaction (its revision and
// the successor on tenure.move.handover); the successor prepares and,
// without a claim of its own, raises its fence to that revision and
// starts. Both sides are in the trace of the holder's epoch.
func TestTraceHandover(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "tracehandover", 16
	tp, exp := testsupport.Tracing(t)
	cli := c.NewClient(t)
	cfg := func(id string) Config {
		cfg := testConfig(t, name, id, parts)
		cfg.TracerProvider = tp
		cfg.Fencers = []fence.Fencer{fleetStore(t, cli, name)}
		cfg.Callbacks = Callbacks{OnAcquired: func(Event) {}, OnPrepare: func(Event) error { return nil }}
		return cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	layout := keys.New(name)
	_, err := fleetview.EnsureSpec(ctx, cli, layout, cfg("a").Ring, false)
	require.NoError(t, err)
	spec, err := fleetview.RequireFeature(ctx, cli, layout, fleetview.FeatureHandover)
	require.NoError(t, err)
	require.Contains(t, spec.Requires, fleetview.FeatureHandover)

	p, old, epoch, out, in := traceJoinMove(t, c, exp, parts, cfg)
	s := spanSet(exp.GetSpans())
	assert.Equal(t, []string{spanPrepare, spanDrain, spanRelease, spanHandover}, s.children(out), "the holder's phases, in order")
	assert.Equal(t, []string{spanPrepare, spanFence, spanStart}, s.children(in), "the successor's phases: no claim of its own")
	assert.Equal(t, out.SpanContext.TraceID(), in.SpanContext.TraceID(), "one trace for both sides")
	assert.Equal(t, out.Parent.SpanID(), in.Parent.SpanID(), "one parent derived from the move")
	assert.Equal(t, strconv.FormatInt(old, 10), attrOf(out, attrEpoch))
	assert.Equal(t, strconv.FormatInt(epoch, 10), attrOf(in, attrEpoch))
	assert.Equal(t, "a", attrOf(in, attrHolder))
	assert.True(t, hasEvent(in, eventAdmit), "the successor's root says when it admits")
	prep, _ := s.of("b", p).named(spanPrepare)
	assert.True(t, hasEvent(prep, eventReady))
	handover, _ := s.of("a", p).named(spanHandover)
	assert.Equal(t, strconv.FormatInt(epoch, 10), attrOf(handover, attrRevision), "the successor's epoch is the hand-over's revision: one write")
	assert.Equal(t, "b", attrOf(handover, attrSuccessor))
	fenceSpan, _ := s.of("b", p).named(spanFence)
	assert.Equal(t, strconv.FormatInt(epoch, 10), attrOf(fenceSpan, attrEpoch))
	resp, err := cli.Get(ctx, layout.Claim(p))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Less(t, resp.Kvs[0].CreateRevision, epoch, "the claim was put over, never deleted")
}

// TestTraceFailover shows the spans of a real failover: the holder's
// session is revoked (and its etcd client closed, as in a crash), and the node that takes its partitions over traces
// the loss it saw, its claim and its fence raise.
func TestTraceFailover(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "tracefail", 8
	tp, exp := testsupport.Tracing(t)
	cli := c.NewClient(t)
	cliA := c.NewClient(t)
	a := join(t, cliA, testConfig(t, name, "a", parts))
	cfgB := testConfig(t, name, "b", parts)
	cfgB.TracerProvider = tp
	cfgB.Fencers = []fence.Fencer{fleetStore(t, cli, name)}
	b := join(t, c.NewClient(t), cfgB)
	waitStable(t, 30*time.Second, a, b)
	var p int
	for p = range parts {
		if a.LookupPartition(p).Local {
			break
		}
	}
	old := a.LookupPartition(p).Epoch
	id, err := strconv.ParseInt(a.Status().Lease, 16, 64)
	require.NoError(t, err)
	// a cannot rejoin (and take its partitions back) without its client.
	require.NoError(t, cliA.Close())
	_, err = cli.Revoke(context.Background(), clientv3.LeaseID(id))
	require.NoError(t, err)

	var root tracetest.SpanStub
	require.NoError(t, waitFor(30*time.Second, func() error {
		var ok bool
		if root, ok = spanSet(exp.GetSpans()).of("b", p).named(spanFailover); !ok {
			return fmt.Errorf("no %s of partition %d yet", spanFailover, p)
		}
		return nil
	}, b))
	s := spanSet(exp.GetSpans())
	kids := s.children(root)
	require.GreaterOrEqual(t, len(kids), 2)
	assert.Equal(t, []string{spanClaim, spanFence}, kids[:2], "claim, then fence raise")
	assert.True(t, hasEvent(root, eventLossSeen))
	assert.Equal(t, "lease_ended", attrOf(root, attrCause))
	assert.Equal(t, "a", attrOf(root, attrHolder))
	assert.Equal(t, root.SpanContext.TraceID(), trace.SpanContextFromContext((&tracer{prefix: "/tenure/" + name + "/"}).moveParent(p, old)).TraceID(), "the trace of the lost claim")
}

// traceJoinMove joins node a, then node b, both configured by cfg, and
// returns a partition p that b's join moves from a, its epoch at a (old)
// and at b (epoch), and the spans of its move out of a and into b.
func traceJoinMove(t *testing.T, c *cluster.Cluster, exp *tracetest.InMemoryExporter, parts int, cfg func(id string) Config) (p int, old, epoch int64, out, in tracetest.SpanStub) {
	t.Helper()
	a := join(t, c.NewClient(t), cfg("a"))
	waitStable(t, 30*time.Second, a)
	p = movingPartition(t, parts, []string{"a"}, "a", "b")
	old = a.LookupPartition(p).Epoch
	b := join(t, c.NewClient(t), cfg("b"))
	waitStable(t, 30*time.Second, a, b)
	epoch = b.LookupPartition(p).Epoch
	require.Greater(t, epoch, old)
	require.NoError(t, waitFor(30*time.Second, func() error {
		s := spanSet(exp.GetSpans())
		var ok1, ok2 bool
		out, ok1 = s.of("a", p).named(spanMoveOut)
		in, ok2 = s.of("b", p).named(spanMoveIn)
		if !ok1 || !ok2 {
			return fmt.Errorf("no %s and %s of partition %d yet", spanMoveOut, spanMoveIn, p)
		}
		return nil
	}, a, b))
	return p, old, epoch, out, in
}
