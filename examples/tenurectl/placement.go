package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/tenure-go/tenure/fleet"
)

// This file holds the placement commands: pin, unpin and the placement
// report.

func cmdPin(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pin", flag.ContinueOnError)
	a := actionFlags(fs, false)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("usage: pin P NODE --reason R [--actor A]")
	}
	p, err := strconv.Atoi(pos[0])
	if err != nil {
		return usagef("partition %q is not a number", pos[0])
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) { return s.op.Pin(s.ctx, p, pos[1], *a) }, printRecord)
}

func cmdUnpin(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("unpin", flag.ContinueOnError)
	a := actionFlags(fs, false)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: unpin P --reason R [--actor A]")
	}
	p, err := strconv.Atoi(pos[0])
	if err != nil {
		return usagef("partition %q is not a number", pos[0])
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) { return s.op.Unpin(s.ctx, p, *a) }, printRecord)
}

func cmdPlacement(g *globals, args []string, out io.Writer) error {
	if err := noArgs("placement", g, args); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.PlacementReport, error) { return s.op.Placement(s.ctx) }, func(w io.Writer, r fleet.PlacementReport) {
		fmt.Fprintf(w, "ring algorithm:\t%v\nrevision:\t%d\nimbalance (partitions):\t%.3f\nimbalance (load):\t%.3f\n",
			r.Algorithm, r.Revision, r.Imbalance, r.LoadImbalance)
		printBalancer(w, r.Balancer)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "MEMBER\tWEIGHT\tPARTITIONS\tPER WEIGHT\tCAPACITY\tLOAD/S\tLOAD PER WEIGHT\tDRAINED")
		for _, m := range r.Members {
			fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%d\t%.3g\t%.3g\t%v\n", m.ID, m.Weight, m.Partitions, m.PerWeight, m.Capacity, m.Load, m.LoadPerWeight, m.Drained)
		}
		fmt.Fprintln(w, "\nPARTITION\tNODE\tORIGIN\tAPPLIED\tBY\tREASON\tMOVED")
		for _, p := range r.Placements {
			fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%s\t%s\n", p.Partition, p.Node, p.Origin, p.Applied, dash(p.By), dash(p.Reason), stamp(p.Moved))
		}
	})
}
