package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// specView is what the spec command prints: the spec, the protocol
// features it records in use, and the fleet's effective features.
type specView struct {
	ring.Spec
	Requires []string `json:"requires"`
	Features []string `json:"features"`
}

func cmdSpec(g *globals, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "algorithm" {
		return cmdSpecAlgorithm(g, args[1:], out)
	}
	if len(args) > 0 && args[0] == "resize" {
		return cmdResize(g, args[1:], out)
	}
	if err := noArgs("spec", g, args); err != nil {
		return err
	}
	return do(g, out, func(s *session) (specView, error) {
		st, err := s.op.Status(s.ctx)
		return specView{Spec: st.Spec, Requires: st.Requires, Features: st.Features}, err
	},
		func(w io.Writer, sp specView) {
			fmt.Fprintf(w, "partitions:\t%d\nload factor:\t%v\nring algorithm:\t%v\n", sp.Partitions, sp.LoadFactor, sp.RingAlgorithm)
			fmt.Fprintf(w, "requires:\t%s\nfleet features:\t%s\n", list(sp.Requires), list(sp.Features))
		})
}

const algorithmUsage = "usage: spec algorithm weighted|bounded --reason R [--actor A] [--budget B] [--dry-run] | spec algorithm status | spec algorithm abort --reason R [--actor A]"

// cmdSpecAlgorithm migrates the fleet to another ring algorithm
// (fleet.Operator.MigrateAlgorithm), reports the migration that runs, or
// aborts it. A migration runs until the spec records the target or
// --timeout ends it; running it again resumes it.
func cmdSpecAlgorithm(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("spec algorithm", flag.ContinueOnError)
	a := actionFlags(fs, false)
	budget := fs.Int("budget", 0, "the most partitions one step moves (default 1% of the partitions)")
	dry := fs.Bool("dry-run", false, "print the moves and steps, change nothing")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(algorithmUsage)
	}
	if pos[0] == "status" {
		return do(g, out, func(s *session) (fleet.Migration, error) {
			st, err := s.op.Status(s.ctx)
			if err != nil || st.Migration == nil {
				return fleet.Migration{From: st.Spec.RingAlgorithm, Target: st.Spec.RingAlgorithm, Done: true, Revision: st.Revision}, err
			}
			return *st.Migration, nil
		}, printMigration)
	}
	m := fleet.Migration{Budget: *budget, DryRun: *dry}
	switch pos[0] {
	case "abort":
		m.Abort = true
	default:
		if err := m.Target.UnmarshalText([]byte(pos[0])); err != nil || m.Target == 0 {
			return usagef("unknown ring algorithm %q: weighted or bounded\n%s", pos[0], algorithmUsage)
		}
	}
	if err := refuse(a, !m.DryRun); err != nil {
		return err
	}
	if m.DryRun && a.Reason == "" {
		a.Reason = "dry run"
	}
	return do(g, out, func(s *session) (fleet.Migration, error) { return s.op.MigrateAlgorithm(s.ctx, m, *a) }, printMigration)
}

// printMigration prints a migration's report.
func printMigration(w io.Writer, m fleet.Migration) {
	switch {
	case m.Abort:
		fmt.Fprintf(w, "aborted:\tyes\nring algorithm:\t%v\n", m.From)
	case m.DryRun:
		fmt.Fprintf(w, "dry run:\t%v -> %v\nmoves:\t%d\nsteps:\t%d (budget %d)\n", m.From, m.Target, m.Moves, m.Steps, m.Budget)
	case m.Done:
		fmt.Fprintf(w, "ring algorithm:\t%v\nmigration:\tnone running\n", m.Target)
		if m.Steps > 0 {
			fmt.Fprintf(w, "steps taken:\t%d\n", m.Steps)
		}
	default:
		fmt.Fprintf(w, "migration:\t%v -> %v\nstarted:\t%s by %s (%s)\nmoves left:\t%d\nplaced:\t%d\nbudget:\t%d\n",
			m.From, m.Target, stamp(m.Started), dash(m.Actor), dash(m.Reason), m.Moves, m.Placed, m.Budget)
	}
	fmt.Fprintf(w, "revision:\t%d\n", m.Revision)
}
