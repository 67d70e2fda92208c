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
// records them ("resize-start", "resize-complete", "resize-abort"); the
// target is "partitions".
const (
	actionResizeStart    = "resize-start"
	actionResizeComplete = "resize-complete"
	actionResizeAbort    = "resize-abort"
)

// ErrResizeInProgress is returned by Resize when another resize of the
// partition count is in progress.
var ErrResizeInProgress = errors.New("fleet: another resize of the partition count is in progress")

// ResizeOptions says how Resize changes the partition count.
type ResizeOptions struct {
	// Actor and Reason say who resizes and why; both are required.
	Actor, Reason string
	// Budget is how many groups may move at once; 0 means 8.
	Budget int
	// DryRun reports the resize's size without changing anything.
	DryRun bool
	// Logger receives one line per step; nil discards them.
	Logger hclog.Logger

	// step, if set, is called after each step that wrote to etcd; false
	// stops the driver there, as a crash would (tests).
	step func(name string) bool
}

// ResizeReport is what Resize did or, for a dry run, would do.
type ResizeReport struct {
	ID     string `json:"id"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Budget int    `json:"budget"`
	// Groups is the number of groups, min(From, To); Moves the partition
	// moves: every source partition handed off and every target claimed.
	Groups int `json:"groups"`
	Moves  int `json:"moves"`
	// Steps is how many budgets of groups the resize takes at least.
	Steps int `json:"steps"`
	// Writes counts the etcd transactions this run of the driver wrote.
	Writes int `json:"writes"`
	// Took is how long this run took; Completed whether it ended the
	// resize (the spec records To).
	Took      Seconds `json:"took_seconds"`
	Completed bool    `json:"completed"`
	DryRun    bool    `json:"dry_run,omitempty"`
}

// ResizeStatus is the resize of the partition count in progress.
type ResizeStatus struct {
	// Partitions is the spec's count; InProgress says whether a resize is
	// in progress, and the fields below describe it.
	Partitions int  `json:"partitions"`
	InProgress bool `json:"in_progress"`

	ID       string    `json:"id,omitempty"`
	From     int       `json:"from,omitempty"`
	To       int       `json:"to,omitempty"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Budget   int       `json:"budget,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Groups   int       `json:"groups,omitempty"`
	Done     int       `json:"done"`
	Moving   int       `json:"moving"`
	Revision int64     `json:"revision"`
}

// ResizeStatus reads the resize of the partition count in progress.
func (o *Operator) ResizeStatus(ctx context.Context) (ResizeStatus, error) {
	v, err := o.view(ctx)
	if err != nil {
		return ResizeStatus{}, err
	}
	return statusOf(v), nil
}

func statusOf(v *view) ResizeStatus {
	s := v.fleet.Shape
	st := ResizeStatus{Partitions: s.Partitions, Revision: v.rev}
	if rs := s.Resize; rs != nil {
		st.InProgress = true
		st.ID, st.From, st.To, st.By, st.Reason, st.Budget, st.Started = rs.ID, rs.From, rs.To, rs.By, rs.Reason, rs.Budget, rs.Started
		st.Groups, st.Done, st.Moving = rs.Small(), len(s.Done), len(s.Moving)
	}
	return st
}

// Resize changes the fleet's partition count to `to` while it serves: one
// count must be the other times a power of two. The change moves group by
// group (see the package ownership documentation, "Changing the partition
// count"), at most opts.Budget groups at once, as planned moves; the nodes
// hand each group off and mark it done, and Resize ends the resize once
// every group is done.
//
// All of its progress is in etcd: a Resize that stops at any step (a
// crash, ctx ended) is resumed by calling it again with the same count,
// from any process, and the groups already asked to move complete without
// it. It returns when the spec records the new count, or ctx ends (the
// report says what this run did, with the error). Each step is audited
// and logged. Errors wrap ErrInvalidConfig, ErrResizeInProgress (a resize
// to another count is in progress), ErrNoSpec or the etcd error.
func (o *Operator) Resize(ctx context.Context, to int, opts ResizeOptions) (rep ResizeReport, err error) {
	start := o.clock.Now()
	if err := (Action{Actor: opts.Actor, Reason: opts.Reason}).check(true); err != nil {
		return ResizeReport{}, err
	}
	if opts.Budget == 0 {
		opts.Budget = 8
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	log := opts.Logger
	v, err := o.view(ctx)
	if err != nil {
		return ResizeReport{}, err
	}
	s := v.fleet.Shape
	rs := s.Resize
	if rs == nil {
		if to == s.Partitions {
			return ResizeReport{From: to, To: to, Completed: true}, nil
		}
		rs = &keys.Resize{ID: strconv.FormatInt(v.rev, 10), From: s.Partitions, To: to, By: opts.Actor, Reason: opts.Reason,
			Budget: opts.Budget, Started: o.clock.Now().UTC()}
		if err := rs.Check(ring.MaxPartitions); err != nil {
			return ResizeReport{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	} else if rs.To != to || rs.Aborting {
		return ResizeReport{}, fmt.Errorf("%w: %s, %d -> %d", ErrResizeInProgress, rs.ID, rs.From, rs.To)
	}
	rep = ResizeReport{ID: rs.ID, From: rs.From, To: rs.To, Budget: rs.Budget, Groups: rs.Small(), Moves: rs.From + rs.To,
		Steps: (rs.Small() + rs.Budget - 1) / rs.Budget, DryRun: opts.DryRun}
	if opts.DryRun {
		return rep, nil
	}
	defer func() { rep.Took = Seconds(o.clock.Since(start)) }()
	stop := func(step string) bool { return opts.step != nil && !opts.step(step) }
	if s.Resize == nil {
		if err := o.startResize(ctx, v, rs); err != nil {
			return rep, err
		}
		rep.Writes++
		log.Info("resize: started", "resize", rs.ID, "from", rs.From, "to", rs.To, "budget", rs.Budget, "by", rs.By, "reason", rs.Reason)
		if stop("start") {
			return rep, context.Canceled
		}
	}
	wait := 10 * time.Millisecond
	for {
		v, err := o.view(ctx)
		if err != nil {
			return rep, err
		}
		s := v.fleet.Shape
		if s.Resize == nil || s.Resize.ID != rs.ID {
			rep.Completed = s.Partitions == to
			return rep, nil
		}
		if len(s.Done) == rs.Small() {
			if err := o.completeResize(ctx, v, opts); err != nil {
				return rep, err
			}
			rep.Writes++
			rep.Completed = true
			log.Info("resize: completed", "resize", rs.ID, "from", rs.From, "to", rs.To, "took", o.clock.Since(start))
			return rep, nil
		}
		var ask []int
		for g := 0; g < rs.Small() && len(s.Moving)+len(ask) < rs.Budget; g++ {
			if !s.IsDone(g) && !s.Moving[g] {
				ask = append(ask, g)
			}
		}
		if len(ask) > 0 {
			ops := make([]clientv3.Op, len(ask))
			for i, g := range ask {
				ops[i] = clientv3.OpPut(o.layout.ResizeMoving(rs.ID, g), "")
			}
			resp, err := o.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", s.SpecRev)).Then(ops...).Commit()
			if err != nil {
				return rep, fmt.Errorf("fleet: resize %s: ask groups to move: %w", rs.ID, err)
			}
			rep.Writes++
			if resp.Succeeded {
				log.Info("resize: groups asked to move", "resize", rs.ID, "groups", len(ask), "first", ask[0], "done", len(s.Done), "of", rs.Small())
				wait = 10 * time.Millisecond
			}
			if stop("moving") {
				return rep, context.Canceled
			}
			continue
		}
		if !clock.Sleep(ctx, o.clock, wait) {
			return rep, ctx.Err()
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// startResize writes rs into the spec and its record, with its audit
// record, if the spec is still the one v read.
func (o *Operator) startResize(ctx context.Context, v *view, rs *keys.Resize) error {
	val, err := fleetview.EncodeSpecResize(v.spec, rs)
	if err != nil {
		return err
	}
	rec, ak := o.newRecord(Action{Actor: rs.By, Reason: rs.Reason}, actionResizeStart, "partitions")
	rec.Node = fmt.Sprintf("%d->%d", rs.From, rs.To)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.fleet.Shape.SpecRev)).
		Then(clientv3.OpPut(o.layout.Spec(), string(val)), clientv3.OpPut(o.layout.ResizeRecord(rs.ID), keys.EncodeResize(*rs)),
			clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return fmt.Errorf("fleet: start resize %d -> %d: %w", rs.From, rs.To, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: the spec changed while the resize started", ErrResizeInProgress)
	}
	return nil
}

// completeResize writes the spec's new count, without the resize, and
// deletes the resize's keys (its record first, so that readers end the
// resize before they see its done keys go), with the audit record.
func (o *Operator) completeResize(ctx context.Context, v *view, opts ResizeOptions) error {
	s := v.fleet.Shape
	rs := s.Resize
	spec := v.spec
	spec.Partitions = rs.To
	action := actionResizeComplete
	if rs.Aborting {
		spec.Partitions, action = rs.From, actionResizeAbort
	}
	val, err := fleetview.EncodeSpecResize(spec, nil)
	if err != nil {
		return err
	}
	rec, ak := o.newRecord(Action{Actor: opts.Actor, Reason: opts.Reason}, action, "partitions")
	rec.Node = fmt.Sprintf("%d->%d", rs.From, spec.Partitions)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", s.SpecRev)).
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

// AbortResize stops the resize in progress before any of its groups is
// done: it deletes the resize's keys and writes the spec without it, in
// one transaction comparing the spec, with its audit record. Once a group
// is done it refuses (ErrResizeInProgress): run Resize to the target count
// to finish it, then Resize back.
func (o *Operator) AbortResize(ctx context.Context, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	v, err := o.view(ctx)
	if err != nil {
		return AuditRecord{}, err
	}
	s := v.fleet.Shape
	if s.Resize == nil {
		return AuditRecord{}, fmt.Errorf("fleet: abort resize: %w: no resize in progress", ErrNotFound)
	}
	if len(s.Done) > 0 {
		return AuditRecord{}, fmt.Errorf("%w: %d of %d groups of resize %s are done; finish it with Resize(%d)", ErrResizeInProgress, len(s.Done), s.Resize.Small(), s.Resize.ID, s.Resize.To)
	}
	rs := *s.Resize
	rs.Aborting = true
	v.fleet.Shape = &fleetview.Shape{Partitions: s.Partitions, SpecRev: s.SpecRev, Resize: &rs}
	if err := o.completeResize(ctx, v, ResizeOptions{Actor: a.Actor, Reason: a.Reason}); err != nil {
		return AuditRecord{}, err
	}
	return AuditRecord{Actor: a.Actor, Action: actionResizeAbort, Target: "partitions", Reason: a.Reason}, nil
}
