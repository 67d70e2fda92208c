package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/ownership/fleet"
)

// This file holds the resize of the partition count: spec resize (and its
// dry run), spec resize status and spec resize abort, on fleet.Operator's
// Resize (with ResizeOptions.Abort for abort) and ResizeStatus. Their JSON
// speaks the vocabulary:
// counts of partitions as "from_partitions" and "to_partitions" (the
// vocabulary's "from" and "to" name nodes), the partition moves as
// "partition_moves" ("moves" lists the balancer's).

// resizeCommands are spec resize's subcommands; without one, spec resize
// runs the resize.
var resizeCommands = map[string]command{
	"status": resizeStatus,
	"abort":  resizeAbort,
}

// resizeUsage is spec resize's usage line.
const resizeUsage = "usage: spec resize --partitions N --reason R [--budget B] [--dry-run] [--actor A] | spec resize status | spec resize abort --reason R [--dry-run] [--actor A]"

// resizeAction reports whether an audit record's action is one of a
// resize ("resize-start", "resize-complete", "resize-abort"), whose node
// field holds the change of the partition count, "from->to".
func resizeAction(action string) bool { return strings.HasPrefix(action, "resize-") }

func cmdResize(g *globals, args []string, out io.Writer) error {
	if len(args) > 0 {
		if cmd, ok := resizeCommands[args[0]]; ok {
			return cmd(g, args[1:], out)
		}
	}
	return resizeRun(g, args, out)
}

// resizeResult is the result of spec resize and spec resize abort: what
// the run of the driver did, or for a dry run what the resize (or the
// abort) takes.
type resizeResult struct {
	ID             string  `json:"id,omitempty"`
	From           int     `json:"from_partitions"`
	To             int     `json:"to_partitions"`
	Aborting       bool    `json:"aborting"`
	Budget         int     `json:"budget"`
	Groups         int     `json:"groups"`
	PartitionMoves int     `json:"partition_moves"`
	Steps          int     `json:"steps"`
	Writes         int     `json:"etcd_writes"`
	Took           float64 `json:"took_seconds"`
	Completed      bool    `json:"completed"`
	Partitions     int     `json:"partitions"`
	DryRun         bool    `json:"dry_run"`
}

func resultOf(r fleet.ResizeReport) resizeResult {
	return resizeResult{ID: r.ID, From: r.From, To: r.To, Aborting: r.Aborting, Budget: r.Budget, Groups: r.Groups,
		PartitionMoves: r.Moves, Steps: r.Steps, Writes: r.Writes, Took: time.Duration(r.Took).Seconds(), Completed: r.Completed,
		Partitions: r.Partitions, DryRun: r.DryRun}
}

func printResize(w io.Writer, r resizeResult) {
	what := fmt.Sprintf("%d -> %d partitions", r.From, r.To)
	if r.Aborting {
		what = fmt.Sprintf("%d -> %d partitions, aborting: back to %d", r.From, r.To, r.From)
	}
	switch {
	case r.DryRun && r.ID != "":
		fmt.Fprintf(w, "resize:\t%s in progress, %s (dry run: nothing written)\n", r.ID, what)
	case r.DryRun:
		fmt.Fprintf(w, "resize:\t%s (dry run: nothing written)\n", what)
	case r.Groups == 0:
		fmt.Fprintf(w, "resize:\tthe fleet has %d partitions already: nothing to do\n", r.Partitions)
		return
	default:
		fmt.Fprintf(w, "resize:\t%s, %s\n", r.ID, what)
	}
	fmt.Fprintf(w, "groups:\t%d (at most %d moving at once)\n", r.Groups, r.Budget)
	fmt.Fprintf(w, "partition moves:\t%d (%d sources handed off, %d targets claimed)\n", r.PartitionMoves, r.From, r.To)
	fmt.Fprintf(w, "steps:\t%d at least\n", r.Steps)
	if r.DryRun {
		return
	}
	done := "no: run the same command again to resume it"
	if r.Completed {
		done = fmt.Sprintf("yes: the fleet has %d partitions", r.Partitions)
	}
	fmt.Fprintf(w, "etcd writes:\t%d (this run)\ntook:\t%v (this run)\ncompleted:\t%s\n", r.Writes, time.Duration(r.Took*float64(time.Second)), done)
}

func resizeRun(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("spec resize", flag.ContinueOnError)
	a := actionFlags(fs, false)
	to := fs.Int("partitions", 0, "the partition count to reach: the fleet's times or divided by a power of two")
	budget := fs.Int("budget", 0, "groups moving at once (default 8; a resize keeps the budget it started with)")
	dry := fs.Bool("dry-run", false, "report the resize's groups, partition moves and steps without changing anything")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q; %s", pos[0], resizeUsage)
	case *to <= 0:
		return usagef("--partitions %d must be positive; %s", *to, resizeUsage)
	case *budget < 0:
		return usagef("--budget %d must not be negative", *budget)
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return drive(g, out, *to, fleet.ResizeOptions{Actor: a.Actor, Reason: a.Reason, Budget: *budget, DryRun: *dry},
		fmt.Sprintf("tenurectl spec resize --partitions %d --reason R", *to))
}

func resizeAbort(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("spec resize abort", flag.ContinueOnError)
	a := actionFlags(fs, false)
	dry := fs.Bool("dry-run", false, "report the resize in progress without changing anything")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q; %s", pos[0], resizeUsage)
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return drive(g, out, 0, fleet.ResizeOptions{Actor: a.Actor, Reason: a.Reason, DryRun: *dry, Abort: true},
		"tenurectl spec resize abort --reason R")
}

// drive runs the driver of a resize (or of its abort) to count to, logs
// its steps on stderr and prints its report. Stopped by --timeout, it
// prints the report, says how far the resize got and how to resume it
// (again, the command line that does), and fails.
func drive(g *globals, out io.Writer, to int, opts fleet.ResizeOptions, again string) error {
	s, err := connect(g)
	if err != nil {
		return err
	}
	defer s.close()
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "tenurectl", Output: g.stderr, Level: hclog.Info})
	rep, err := s.op.Resize(s.ctx, to, opts)
	switch {
	case errors.Is(err, fleet.ErrNoSpec) && s.ctx.Err() == nil:
		return missingSpec(s, err)
	case err != nil && rep.ID != "" && !opts.DryRun && s.ctx.Err() != nil:
		// --timeout ended the run: the resize is in etcd and goes on.
		if perr := emit(g, out, resultOf(rep), printResize); perr != nil {
			return perr
		}
		return s.stopped(again)
	case err != nil:
		return s.wrap(err)
	}
	if opts.DryRun && !rep.InProgress {
		rep.ID = "" // the ID a new resize would take: nothing was written
	}
	return emit(g, out, resultOf(rep), printResize)
}

// stopped explains a resize that --timeout stopped: what etcd records of
// it, read in the time kept to diagnose, and how to resume it.
func (s *session) stopped(again string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.diag)
	defer cancel()
	st, err := s.op.ResizeStatus(ctx)
	if err != nil {
		return s.wrap(fmt.Errorf("the resize did not complete within %v (--timeout), and its status cannot be read: %w", s.g.timeout, err))
	}
	if !st.InProgress {
		return fmt.Errorf("the resize did not complete within %v (--timeout), and none is in progress now (it did not start, or another run ended it): the fleet has %d partitions; see tenurectl audit",
			s.g.timeout, st.Partitions)
	}
	return fmt.Errorf("the resize did not complete within %v (--timeout): %d of %d groups done, %d moving, %d fenced%s; "+
		"the groups asked to move complete without tenurectl; run it again (with a longer --timeout) to resume: %s",
		s.g.timeout, st.Done, st.Groups, st.Moving, st.Fenced, aborting(st.Aborting), again)
}

func aborting(b bool) string {
	if b {
		return ", aborting"
	}
	return ""
}

// resizeState is spec resize status's result: the spec's partition count
// and the resize in progress, if any.
type resizeState struct {
	Revision   int64 `json:"revision"`
	Partitions int   `json:"partitions"`
	InProgress bool  `json:"in_progress"`

	ID           string     `json:"id,omitempty"`
	From         int        `json:"from_partitions,omitempty"`
	To           int        `json:"to_partitions,omitempty"`
	Aborting     bool       `json:"aborting,omitempty"`
	By           string     `json:"by,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Budget       int        `json:"budget,omitempty"`
	Started      *time.Time `json:"started,omitempty"`
	Groups       int        `json:"groups,omitempty"`
	GroupsDone   int        `json:"groups_done"`
	GroupsMoving int        `json:"groups_moving"`
	GroupsFenced int        `json:"groups_fenced"`
}

func stateOf(st fleet.ResizeReport) resizeState {
	r := resizeState{Revision: st.Revision, Partitions: st.Partitions, InProgress: st.InProgress}
	if st.InProgress {
		r.ID, r.From, r.To, r.Aborting, r.By, r.Reason, r.Budget, r.Groups = st.ID, st.From, st.To, st.Aborting, st.By, st.Reason, st.Budget, st.Groups
		r.GroupsDone, r.GroupsMoving, r.GroupsFenced = st.Done, st.Moving, st.Fenced
		if !st.Started.IsZero() {
			t := st.Started.UTC()
			r.Started = &t
		}
	}
	return r
}

func printResizeState(w io.Writer, r resizeState) {
	fmt.Fprintf(w, "revision:\t%d\npartitions:\t%d\n", r.Revision, r.Partitions)
	if !r.InProgress {
		fmt.Fprintln(w, "resize:\tnone in progress")
		return
	}
	started := "-"
	if r.Started != nil {
		started = stamp(*r.Started)
	}
	what := ""
	if r.Aborting {
		what = fmt.Sprintf(", aborting: back to %d", r.From)
	}
	fmt.Fprintf(w, "resize:\t%s, %d -> %d partitions%s\nby:\t%s\nreason:\t%s\nstarted:\t%s\n", r.ID, r.From, r.To, what, dash(r.By), dash(r.Reason), started)
	fmt.Fprintf(w, "budget:\t%d groups moving at once\ngroups:\t%d done, %d moving, %d fenced, of %d\n",
		r.Budget, r.GroupsDone, r.GroupsMoving, r.GroupsFenced, r.Groups)
}

func resizeStatus(g *globals, args []string, out io.Writer) error {
	if err := noArgs("spec resize status", g, args); err != nil {
		return err
	}
	return do(g, out, func(s *session) (resizeState, error) {
		st, err := s.op.ResizeStatus(s.ctx)
		return stateOf(st), err
	}, printResizeState)
}
