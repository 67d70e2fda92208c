package balance

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/election"
)

// Tracing: with Config.TracerProvider set, each pass of Run is one span,
// tenure.balance.pass, from its plan to its transaction's answer, with
// the attributes tenure.epoch (the balancer's term), tenure.revision (the
// snapshot planned from), tenure.balance.moves and tenure.balance.removes
// (what the pass planned), tenure.balance.before and tenure.balance.after
// (the imbalance), and tenure.balance.resizing while a resize pauses the
// passes; a pass that fails (refused as stale, deposed, suspended, an
// etcd alarm) is marked as an error with its cause.

// Span name and attribute keys of the balance package: their one home.
const (
	spanPass     = "tenure.balance.pass"
	attrEpoch    = attribute.Key("tenure.epoch")
	attrRevision = attribute.Key("tenure.revision")
	attrMoves    = attribute.Key("tenure.balance.moves")
	attrRemoves  = attribute.Key("tenure.balance.removes")
	attrBefore   = attribute.Key("tenure.balance.before")
	attrAfter    = attribute.Key("tenure.balance.after")
	attrResizing = attribute.Key("tenure.balance.resizing")
	tracerScope  = "github.com/tenure-go/tenure/ownership/balance"
)

// startPass opens the span of a pass under term; nil without a provider.
func (b *Balancer) startPass(ctx context.Context, term *election.Term) (context.Context, trace.Span) {
	if b.cfg.TracerProvider == nil {
		return ctx, nil
	}
	return b.cfg.TracerProvider.Tracer(tracerScope).Start(ctx, spanPass, trace.WithAttributes(attrEpoch.Int64(term.Token().Epoch)))
}

// endPass ends sp, the span of a pass that planned pl (nil if its plan
// failed) and ended with err.
func endPass(sp trace.Span, pl *Planned, err error) {
	if sp == nil {
		return
	}
	if pl != nil {
		sp.SetAttributes(attrRevision.Int64(pl.Rev), attrMoves.Int(len(pl.Moves)), attrRemoves.Int(len(pl.Removes)),
			attrBefore.Float64(pl.Before), attrAfter.Float64(pl.After))
		if pl.Resizing != "" {
			sp.SetAttributes(attrResizing.String(pl.Resizing))
		}
	}
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}
