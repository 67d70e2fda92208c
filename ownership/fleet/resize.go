package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// The actions of a resize of the partition count, as AuditRecord.Action
// records them ("resize-start", "resize-abort", "resize-complete"); the
// target is "partitions".
const (
	actionResizeStart    = "resize-start"
	actionResizeComplete = "resize-complete"
	actionResizeAbort    = "resize-abort"
)

// ErrResizeInProgress is returned by Resize when another resize of the
// partition count is in progress, or the spec changed while it wrote.
var ErrResizeInProgress = errors.New("fleet: another resize of the partition count is in progress")

// ResizeOptions says how Resize changes the partition count.
type ResizeOptions struct {
	// Actor and Reason say who resizes and why; both are required.
	Actor, Reason string
	// Budget is how many groups may move at once; 0 means 8. A resize
	// keeps the budget it started with.
	Budget int
	// DryRun reports the resize's size, or the one in progress, without
	// changing anything.
	DryRun bool
	// Abort returns the resize in progress to the count it started from:
	// the groups already done move back the same way, at most its budget
	// at once. The count given to Resize must be 0 or that count.
	Abort bool
	// Logger receives one line per step; nil discards them.
	Logger hclog.Logger

	// step, if set, is called after each step that wrote to etcd; false
	// stops the driver there, as a crash would (tests).
	step func(name string) bool
}

// ResizeReport is what Resize did or, for a dry run, would do; and, from
// ResizeStatus, the resize in progress.
type ResizeReport struct {
	ID     string `json:"id,omitempty"`
	From   int    `json:"from,omitempty"`
	To     int    `json:"to,omitempty"`
	Budget int    `json:"budget,omitempty"`
	// Groups is the number of groups, min(From, To); Moves the partition
	// moves: every source partition handed off and every target claimed.
	Groups int `json:"groups,omitempty"`
	Moves  int `json:"moves,omitempty"`
	// Steps is how many budgets of groups the resize takes at least.
	Steps int `json:"steps,omitempty"`
	// Writes counts the etcd transactions this run of the driver wrote.
	Writes int `json:"writes"`
	// Took is how long this run took; Completed whether it ended the
	// resize (the spec records its final count).
	Took      Seconds `json:"took_seconds"`
	Completed bool    `json:"completed"`
	DryRun    bool    `json:"dry_run,omitempty"`

	// Partitions is the spec's count (From during a resize), at Revision.
	// InProgress says whether a resize is in progress; Aborting whether
	// it returns to From; By, Reason and Started who started it, why and
	// when; Done, Moving and Fenced count its groups in each state.
	Partitions int       `json:"partitions"`
	Revision   int64     `json:"revision"`
	InProgress bool      `json:"in_progress"`
	Aborting   bool      `json:"aborting,omitempty"`
	By         string    `json:"by,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Started    time.Time `json:"started,omitzero"`
	Done       int       `json:"done"`
	Moving     int       `json:"moving"`
	Fenced     int       `json:"fenced"`
}

// ResizeStatus reads the resize of the partition count in progress; with
// none, the report has only Partitions and Revision.
func (o *Operator) ResizeStatus(ctx context.Context) (ResizeReport, error) {
	v, err := o.view(ctx)
	if err != nil {
		return ResizeReport{}, err
	}
	return reportOf(v.fleet.Shape, v.rev), nil
}

// reportOf describes the resize of s, at rev.
func reportOf(s *fleetview.Shape, rev int64) ResizeReport {
	r := ResizeReport{Partitions: s.Partitions, Revision: rev}
	rs := s.Resize
	if rs == nil {
		return r
	}
	r.ID, r.From, r.To, r.Budget, r.Groups = rs.ID, rs.From, rs.To, rs.Budget, rs.Small()
	r.Moves, r.Steps = rs.From+rs.To, (rs.Small()+rs.Budget-1)/rs.Budget
	r.InProgress, r.Aborting, r.By, r.Reason, r.Started = true, rs.Aborting, rs.By, rs.Reason, rs.Started
	r.Done, r.Moving, r.Fenced = len(s.Done), len(s.Moving), len(s.Fenced)
	return r
}

// Resize changes the fleet's partition count to `to` while it serves: one
// count must be the other times a power of two. The change moves group by
// group (see the package ownership documentation, "Changing the partition
// count"), at most opts.Budget groups at once, as planned moves; the nodes
// hand each group off and mark it done, and Resize ends the resize once
// every group is done and its holders have retired the partitions it
// replaced. With opts.Abort it returns the resize in progress to its
// starting count instead, moving its done groups back the same way.
//
// All of its progress is in etcd: a Resize that stops at any step (a
// crash, ctx ended) is resumed by calling it again with the same count
// (an abort with Abort, or with the starting count), from any process, and
// the groups already asked to move complete without it. It returns when
// the spec records the final count, or ctx ends (the report says what
// this run did, with the error). Each step is audited and logged. Errors
// wrap ErrInvalidConfig, ErrResizeInProgress (a resize to another count is
// in progress), ErrNotFound (Abort without a resize in progress),
// ErrNoSpec or the etcd error.
func (o *Operator) Resize(ctx context.Context, to int, opts ResizeOptions) (rep ResizeReport, err error) {
	start := o.clock.Now()
	ctx, sp := o.startResize(ctx, to)
	defer func() { endSpan(sp, err) }()
	if err := (Action{Actor: opts.Actor, Reason: opts.Reason}).check(true); err != nil {
		return ResizeReport{}, err
	}
	if opts.Budget == 0 {
		opts.Budget = 8
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	v, err := o.view(ctx)
	if err != nil {
		return ResizeReport{}, err
	}
	s := v.fleet.Shape
	rs := s.Resize
	switch {
	case rs == nil && opts.Abort:
		return reportOf(s, v.rev), fmt.Errorf("fleet: abort resize: %w: no resize in progress", ErrNotFound)
	case rs == nil && to == s.Partitions:
		return ResizeReport{From: to, To: to, Partitions: to, Revision: v.rev, Completed: true}, nil
	case rs == nil && v.migration != nil:
		return reportOf(s, v.rev), fmt.Errorf("%w: a migration of the ring algorithm is in progress (finish or abort it first)", ErrResizeInProgress)
	case rs == nil:
		rs = &keys.Resize{ID: strconv.FormatInt(v.rev, 10), From: s.Partitions, To: to, By: opts.Actor, Reason: opts.Reason,
			Budget: opts.Budget, Started: o.clock.Now().UTC()}
		if err := rs.Check(ring.MaxPartitions); err != nil {
			return ResizeReport{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	case opts.Abort && to != 0 && to != rs.From:
		return reportOf(s, v.rev), fmt.Errorf("%w: abort returns resize %s to %d, not %d", ErrInvalidConfig, rs.ID, rs.From, to)
	case opts.Abort, rs.Aborting && to == rs.From:
		opts.Abort = true
	case rs.To != to || rs.Aborting:
		return reportOf(s, v.rev), fmt.Errorf("%w: %s, %d -> %d (aborting: %v); run Resize to %d to finish it, or with Abort to return to %d",
			ErrResizeInProgress, rs.ID, rs.From, rs.To, rs.Aborting, rs.To, rs.From)
	}
	if opts.DryRun {
		rep = reportOf(s.WithResize(rs), v.rev)
		rep.DryRun, rep.InProgress = true, s.Resize != nil
		return rep, nil
	}
	if s.Resize == nil {
		// The feature gate: every live member understands a resize, and
		// the spec records it in use, before the resize is written
		// against the spec as it is then.
		if _, err := fleetview.RequireFeature(ctx, o.kv, o.layout, fleetview.FeatureResize); err != nil {
			return reportOf(s, v.rev), fmt.Errorf("fleet: resize %d -> %d: %w", rs.From, rs.To, err)
		}
		if v, err = o.view(ctx); err != nil {
			return ResizeReport{}, err
		}
	}
	d := &driver{o: o, opts: opts, log: opts.Logger, rep: &rep}
	err = d.run(ctx, v, rs)
	rep.Took = Seconds(o.clock.Since(start))
	return rep, err
}

// errStopped is what a driver stopped by its test hook returns.
var errStopped = errors.New("fleet: resize driver stopped by its test hook")

// driver is one run of Resize.
type driver struct {
	o    *Operator
	opts ResizeOptions
	log  hclog.Logger
	rep  *ResizeReport
	// waited is the last reason to wait the driver logged (explainWait).
	waited resizeWait
}

// stop reports whether the test hook stops the driver after step.
func (d *driver) stop(step string) bool { return d.opts.step != nil && !d.opts.step(step) }

// run drives the resize rs from the view v to its end.
func (d *driver) run(ctx context.Context, v *view, rs *keys.Resize) error {
	o, log := d.o, d.log
	*d.rep = reportOf(v.fleet.Shape.WithResize(rs), v.rev)
	if v.fleet.Shape.Resize == nil {
		sp := d.startStep(ctx, rs, "start")
		err := o.writeResize(ctx, v, rs, actionResizeStart, Action{Actor: d.opts.Actor, Reason: d.opts.Reason})
		if endSpan(sp, err); err != nil {
			return err
		}
		d.rep.Writes++
		log.Info("resize: started", "resize", rs.ID, "from", rs.From, "to", rs.To, "budget", rs.Budget, "by", rs.By, "reason", rs.Reason)
		if d.stop("start") {
			return errStopped
		}
	} else if d.opts.Abort && !rs.Aborting {
		ab := *rs
		ab.Aborting = true
		sp := d.startStep(ctx, rs, "abort")
		err := o.writeResize(ctx, v, &ab, actionResizeAbort, Action{Actor: d.opts.Actor, Reason: d.opts.Reason})
		if endSpan(sp, err); err != nil {
			return err
		}
		d.rep.Writes++
		log.Info("resize: aborting", "resize", rs.ID, "from", rs.From, "to", rs.To, "done", len(v.fleet.Shape.Done), "by", d.opts.Actor, "reason", d.opts.Reason)
		if d.stop("abort") {
			return errStopped
		}
	}
	final := rs.To
	if d.opts.Abort {
		final = rs.From
	}
	wait := 10 * time.Millisecond
	for {
		v, err := o.view(ctx)
		if err != nil {
			return err
		}
		s := v.fleet.Shape
		if s.Resize == nil || s.Resize.ID != rs.ID {
			d.rep.Completed = s.Partitions == final && s.Resize == nil
			d.rep.Partitions, d.rep.InProgress = s.Partitions, s.Resize != nil
			if !d.rep.Completed {
				return fmt.Errorf("%w: resize %s ended with %d partitions, not %d", ErrResizeInProgress, rs.ID, s.Partitions, final)
			}
			return nil
		}
		d.rep.Done, d.rep.Moving, d.rep.Fenced, d.rep.Revision = len(s.Done), len(s.Moving), len(s.Fenced), v.rev
		if s.Settled() {
			sp := d.startStep(ctx, rs, "complete")
			err := o.completeResize(ctx, v, d.opts)
			if endSpan(sp, err); err != nil {
				return err
			}
			d.rep.Writes++
			d.rep.Completed, d.rep.InProgress, d.rep.Partitions = true, false, final
			log.Info("resize: completed", "resize", rs.ID, "from", rs.From, "to", rs.To, "partitions", final, "took", o.clock.Since(rs.Started))
			return nil
		}
		ask := toMove(s)
		if len(ask) == 0 {
			if wait == maxResizeWait {
				d.explainWait(v.fleet) // it has waited a while: say for what
			}
			if !clock.Sleep(ctx, o.clock, wait) {
				return ctx.Err()
			}
			wait = min(2*wait, maxResizeWait)
			continue
		}
		ops := make([]clientv3.Op, len(ask))
		for i, g := range ask {
			ops[i] = clientv3.OpPut(o.layout.ResizeMoving(rs.ID, g), "")
		}
		sp := d.startStep(ctx, rs, "moving", attrGroups.Int(len(ask)))
		resp, err := o.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", s.SpecRev)).Then(ops...).Commit()
		endSpan(sp, err)
		if err != nil {
			return fmt.Errorf("fleet: resize %s: ask groups to move: %w", rs.ID, err)
		}
		d.rep.Writes++
		if resp.Succeeded {
			log.Info("resize: groups asked to move", "resize", rs.ID, "aborting", s.Aborting(), "groups", len(ask), "first", ask[0],
				"done", len(s.Done), "of", rs.Small())
			wait = 10 * time.Millisecond
		}
		if d.stop("moving") {
			return errStopped
		}
	}
}

// maxResizeWait is the longest a resize's driver sleeps between two
// reads of the fleet while its groups move; once its sleeps reach it, it
// logs why it waits (explainWait).
const maxResizeWait = 200 * time.Millisecond

// toMove returns the groups of s's resize to ask to move now, within its
// budget: groups not done (moving forward) or done (aborting) and not
// moving yet.
func toMove(s *fleetview.Shape) []int {
	rs := s.Resize
	var ask []int
	for g := 0; g < rs.Small() && len(s.Moving)+len(ask) < rs.Budget; g++ {
		if s.IsDone(g) == s.Aborting() && !s.Moving[g] {
			ask = append(ask, g)
		}
	}
	return ask
}

// writeResize writes rs into the spec and its record, with its audit
// record, if the spec is still the one v read. An abort (rs.Aborting)
// deletes the moving keys with it: the groups moving forward stay where
// they are.
func (o *Operator) writeResize(ctx context.Context, v *view, rs *keys.Resize, action string, a Action) error {
	stored := v.stored
	stored.Resize = rs
	val, err := fleetview.EncodeStored(stored)
	if err != nil {
		return err
	}
	rec, ak := o.newRecord(a, action, "partitions")
	rec.Node = fmt.Sprintf("%d->%d", rs.From, rs.To)
	ops := []clientv3.Op{clientv3.OpPut(o.layout.Spec(), string(val)), clientv3.OpPut(o.layout.ResizeRecord(rs.ID), keys.EncodeResize(*rs))}
	if rs.Aborting {
		rec.Node = fmt.Sprintf("%d->%d->%d", rs.From, rs.To, rs.From)
		for g := range v.fleet.Shape.Moving {
			ops = append(ops, clientv3.OpDelete(o.layout.ResizeMoving(rs.ID, g)))
		}
	}
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.stored.ModRev),
			clientv3.Compare(clientv3.CreateRevision(o.layout.Migration()), "=", 0)).
		Then(append(ops, clientv3.OpPut(ak, encodeRecord(rec)))...).
		Commit()
	if err != nil {
		return fmt.Errorf("fleet: %s %d -> %d: %w", action, rs.From, rs.To, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: the spec changed while the resize was written (%s)", ErrResizeInProgress, action)
	}
	return nil
}

// completeResize writes the spec's final count, without the resize, and
// deletes the resize's keys (its record first, so that readers end the
// resize before they see its other keys go), with the audit record.
func (o *Operator) completeResize(ctx context.Context, v *view, opts ResizeOptions) error {
	s := v.fleet.Shape
	rs := s.Resize
	spec := v.stored
	spec.Resize = nil
	spec.Partitions = rs.To
	if rs.Aborting {
		spec.Partitions = rs.From
	}
	val, err := fleetview.EncodeStored(spec)
	if err != nil {
		return err
	}
	rec, ak := o.newRecord(Action{Actor: opts.Actor, Reason: opts.Reason}, actionResizeComplete, "partitions")
	rec.Node = fmt.Sprintf("%d->%d", rs.From, spec.Partitions)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.stored.ModRev)).
		Then(clientv3.OpPut(o.layout.Spec(), string(val)), clientv3.OpDelete(o.layout.ResizeRecord(rs.ID)),
			clientv3.OpDelete(o.layout.ResizeKeys(rs.ID), clientv3.WithPrefix()), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return fmt.Errorf("fleet: complete resize %s: %w", rs.ID, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: the spec changed while the resize completed", ErrResizeInProgress)
	}
	return nil
}
