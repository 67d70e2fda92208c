package ownership

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: with Config.TracerProvider set, the node opens spans for every
// phase of a partition's tenure as its record changes (loop.transition
// calls tracer.edge), so that the spans follow the one state of the
// partition and need no call of their own at each step:
//
//	span                  side       from                                to
//	tenure.move.out       holder     the ring moved p away               the claim deleted (or handed over)
//	tenure.move.prepare   both       holder: waiting for the successor's readiness; successor: OnPrepare and its readiness put
//	tenure.move.drain     holder     admission ended                     the work in flight finished
//	tenure.move.release   holder     context cancelled, OnReleased       OnReleased returned
//	tenure.move.handover  holder     the claim's deletion queued         the claim deleted or handed over
//	tenure.move.in        successor  p assigned here, held by another    p admits work
//	tenure.failover       successor  p claimed after its holder's        p admits work
//	                                 session was lost (event "loss
//	                                 seen", at the deletion)
//	tenure.acquire        successor  p claimed, held by nobody before    p admits work
//	tenure.claim          successor  the claim transaction               its answer
//	tenure.fence          successor  the fencers raised to the epoch     all raised
//	tenure.start          successor  OnAcquired queued                   it returned (or the acquired timeout)
//
// Events: "ready" (the successor's preparation is done), "retry" (a failed
// fence raise or claim deletion waits to be retried), "admit" (the
// partition admits its first call), "loss seen". Attributes (keys below):
// tenure.partition, tenure.epoch (the holder's epoch on tenure.move.out,
// the new one on the successor's phases once claimed), tenure.node,
// tenure.failover.cause, tenure.holder; on tenure.move.handover,
// tenure.revision (the revision of the transaction that deleted the claim
// or handed it over: the moves of one leave batched in a transaction
// share it) and tenure.successor (the node the claim was handed over to,
// absent when it was deleted). A handed-over claim's epoch is that
// revision: the successor's tenure.epoch equals its holder's
// tenure.revision, one write; after a deletion the successor's own claim
// is a second.
//
// Both sides of one move share a trace without trusting the network: the
// trace ID is derived from what etcd records, the cluster prefix, the
// partition and the epoch of the claim that moves (the holder knows it as
// its own; the successor reads it from the claim it prepares for, or
// from the claim whose deletion it saw), and each side's root span is a
// child of a span context derived the same way (a parent no process
// records, sampled). A failover's spans share the trace of the lost claim
// the same way. Nothing a peer sends is read.

// Span names and attribute keys of the ownership package: their one home.
const (
	spanMoveOut     = "tenure.move.out"
	spanMoveIn      = "tenure.move.in"
	spanPrepare     = "tenure.move.prepare"
	spanDrain       = "tenure.move.drain"
	spanRelease     = "tenure.move.release"
	spanHandover    = "tenure.move.handover"
	spanFailover    = "tenure.failover"
	spanAcquire     = "tenure.acquire"
	spanClaim       = "tenure.claim"
	spanFence       = "tenure.fence"
	spanStart       = "tenure.start"
	eventReady      = "ready"
	eventRetry      = "retry"
	eventAdmit      = "admit"
	eventLossSeen   = "loss seen"
	attrPartition   = attribute.Key("tenure.partition")
	attrEpoch       = attribute.Key("tenure.epoch")
	attrNode        = attribute.Key("tenure.node")
	attrCause       = attribute.Key("tenure.failover.cause")
	attrHolder      = attribute.Key("tenure.holder")
	attrRevision    = attribute.Key("tenure.revision")
	attrSuccessor   = attribute.Key("tenure.successor")
	tracerScopeName = "github.com/tenure-go/tenure/ownership"
)

// tracer opens the spans of the partitions' phases. A nil *tracer (no
// Config.TracerProvider) opens none and costs a nil check. Only the event
// loop uses it.
type tracer struct {
	t      trace.Tracer
	prefix string
	node   string
	parts  map[int]*partSpans
}

// partSpans is the open spans of one partition: the root of its move (or
// acquisition) and its current phase.
type partSpans struct {
	root, cur trace.Span
	ctx       context.Context // the root's
	out       bool            // root is the holder's tenure.move.out
}

// newTracer returns the node's tracer, nil without a provider.
func newTracer(tp trace.TracerProvider, prefix, node string) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{t: tp.Tracer(tracerScopeName), prefix: prefix, node: node, parts: map[int]*partSpans{}}
}

// moveParent returns a context whose remote parent is derived from the
// claim of partition p at epoch, the same on every node of the fleet.
func (tr *tracer) moveParent(p int, epoch int64) context.Context {
	var b []byte
	b = append(b, tr.prefix...)
	b = binary.BigEndian.AppendUint64(append(b, 0), uint64(p))
	b = binary.BigEndian.AppendUint64(b, uint64(epoch))
	h := sha256.Sum256(b)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], h[:16])
	copy(sid[:], h[16:24])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// begin opens partition p's root span name under parent (a fresh trace if
// nil), ending any spans p had open.
func (tr *tracer) begin(p int, parent context.Context, name string, at time.Time, attrs ...attribute.KeyValue) *partSpans {
	tr.end(p, "")
	if parent == nil {
		parent = context.Background()
	}
	attrs = append(attrs, attrPartition.Int(p), attrNode.String(tr.node))
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	ctx, root := tr.t.Start(parent, name, opts...)
	ps := &partSpans{root: root, ctx: ctx}
	tr.parts[p] = ps
	return ps
}

// phase ends p's current phase span and opens the next one, name.
func (tr *tracer) phase(p int, name string, attrs ...attribute.KeyValue) {
	ps := tr.parts[p]
	if ps == nil {
		return
	}
	if ps.cur != nil {
		ps.cur.End()
	}
	_, ps.cur = tr.t.Start(ps.ctx, name, trace.WithAttributes(append(attrs, attrPartition.Int(p))...))
}

// event adds an event to p's current span.
func (tr *tracer) event(p int, name string) {
	if ps := tr.parts[p]; ps != nil && ps.cur != nil {
		ps.cur.AddEvent(name)
	}
}

// end ends p's open spans; a non-empty failure marks them as errors.
func (tr *tracer) end(p int, failure string) {
	ps := tr.parts[p]
	if ps == nil {
		return
	}
	delete(tr.parts, p)
	for _, s := range []trace.Span{ps.cur, ps.root} {
		if s == nil {
			continue
		}
		if failure != "" {
			s.SetStatus(codes.Error, failure)
		}
		s.End()
	}
}

// wrote records, on p's current span (the holder's tenure.move.handover),
// the revision rev at which its claim was deleted or, to a successor to
// (not empty), handed over.
func (tr *tracer) wrote(p int, rev int64, to string) {
	if tr == nil {
		return
	}
	ps := tr.parts[p]
	if ps == nil || ps.cur == nil {
		return
	}
	ps.cur.SetAttributes(attrRevision.Int64(rev))
	if to != "" {
		ps.cur.SetAttributes(attrSuccessor.String(to))
	}
}

// claimEnded ends the spans of p, whose claim transaction did not give
// it a tenure (failed, or beaten by another claim).
func (tr *tracer) claimEnded(p int, why string) {
	if tr != nil {
		tr.end(p, why)
	}
}

// edge follows partition p's record from from to to (loop.transition);
// end is why its tenure ends, if it does.
func (tr *tracer) edge(l *loop, p int, from, to *record, end reason) {
	if tr == nil {
		return
	}
	if to.phase == phaseIdle && end == reasonLost {
		tr.end(p, end.String()) // a claim in flight too: its answer is dropped
		return
	}
	if from.phase == to.phase && (to.move == nil) == (from.move == nil) {
		return
	}
	switch to.phase {
	case phasePreparing:
		tr.begin(p, tr.moveParent(p, to.prep.epoch), spanMoveIn, time.Time{}, attrHolder.String(to.prep.holder))
		tr.phase(p, spanPrepare)
	case phaseReady:
		tr.event(p, eventReady)
	case phaseClaiming:
		if tr.parts[p] == nil {
			tr.beginAcquire(l, p)
		}
		tr.phase(p, spanClaim)
	case phaseFencing:
		if ps := tr.parts[p]; ps != nil {
			ps.root.SetAttributes(attrEpoch.Int64(to.t.token.Epoch))
		}
		tr.phase(p, spanFence, attrEpoch.Int64(to.t.token.Epoch))
	case phaseFenceWait, phaseDeleteWait:
		tr.event(p, eventRetry)
	case phaseStarting:
		tr.phase(p, spanStart, attrEpoch.Int64(to.t.token.Epoch))
	case phaseServing:
		switch {
		case to.move != nil && from.move == nil:
			tr.beginOut(p, to.t.token.Epoch, to.move.since)
			tr.phase(p, spanPrepare, attrEpoch.Int64(to.t.token.Epoch))
		case to.move == nil && from.move != nil:
			tr.end(p, "move called off")
		case from.phase == phaseStarting || from.phase == phaseFencing:
			if ps := tr.parts[p]; ps != nil {
				ps.root.AddEvent(eventAdmit)
			}
			tr.end(p, "")
		}
	case phaseDraining:
		if ps := tr.parts[p]; ps == nil || !ps.out {
			tr.beginOut(p, to.t.token.Epoch, time.Time{})
		}
		tr.phase(p, spanDrain, attrEpoch.Int64(to.t.token.Epoch))
	case phaseReleasing:
		tr.phase(p, spanRelease, attrEpoch.Int64(to.t.token.Epoch))
	case phaseDeleting:
		tr.phase(p, spanHandover, attrEpoch.Int64(to.epoch))
	case phaseIdle:
		if from.phase != phaseClaiming { // a claim's answer: its outcome follows (claimEnded, or fencing)
			tr.end(p, "")
		}
	}
}

// beginOut opens the holder's root span of the move of p away from its
// tenure at epoch, begun at since (now if zero).
func (tr *tracer) beginOut(p int, epoch int64, since time.Time) {
	tr.begin(p, tr.moveParent(p, epoch), spanMoveOut, since, attrEpoch.Int64(epoch)).out = true
}

// beginAcquire opens the root span of p's acquisition: a failover if the
// claim this node saw deleted last went with its holder's session, a move
// in if it was deleted otherwise, a first acquisition if none was.
func (tr *tracer) beginAcquire(l *loop, p int) {
	lc, ok := l.n.report.failovers.lost[p]
	switch {
	case !ok || lc.epoch == 0:
		tr.begin(p, nil, spanAcquire, time.Time{})
	case lc.cause != 0:
		ps := tr.begin(p, tr.moveParent(p, lc.epoch), spanFailover, lc.seen, attrCause.String(lc.cause.String()), attrHolder.String(lc.holder))
		ps.root.AddEvent(eventLossSeen, trace.WithTimestamp(lc.seen))
	default:
		tr.begin(p, tr.moveParent(p, lc.epoch), spanMoveIn, time.Time{}, attrHolder.String(lc.holder))
	}
}
