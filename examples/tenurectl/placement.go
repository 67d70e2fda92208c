package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/ownership/fleet"
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
		load := loadHeader(r.Members)
		fmt.Fprintf(w, "ring algorithm:\t%v\nrevision:\t%d\nimbalance (partitions per weight):\t%.3f\nimbalance (load per weight):\t%.3f\n",
			r.Algorithm, r.Revision, r.Imbalance, r.LoadImbalance)
		printBalancer(w, r.Balancer)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "MEMBER\tWEIGHT\tPARTITIONS\tPARTITIONS PER WEIGHT\tCAPACITY\t%s\t%[1]s PER WEIGHT\tDRAINED\n", load)
		for _, m := range r.Members {
			fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%d\t%.3g\t%.3g\t%v\n", m.ID, m.Weight, m.Partitions, m.PerWeight, m.Capacity, m.Load, m.LoadPerWeight, m.Drained)
		}
		fmt.Fprintln(w, "\nPARTITION\tNODE\tORIGIN\tAPPLIED\tBY\tREASON\tMOVED AT")
		for _, p := range r.Placements {
			fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\t%s\t%s\n", p.Partition, p.Node, p.Origin, p.Applied, dash(p.By), dash(p.Reason), stamp(p.Moved))
		}
	})
}

// loadHeader names the load the members report: units of work per second,
// smoothed by an exponentially weighted moving average over the window
// their load reports give ("LOAD/S (EWMA 1m)"), a range if they differ.
func loadHeader(ms []fleet.MemberPlacement) string {
	var lo, hi time.Duration
	for _, m := range ms {
		if w := time.Duration(m.LoadWindow); w > 0 {
			if lo == 0 || w < lo {
				lo = w
			}
			hi = max(hi, w)
		}
	}
	switch {
	case hi == 0:
		return "LOAD/S (EWMA)"
	case lo == hi:
		return "LOAD/S (EWMA " + shortDuration(lo) + ")"
	}
	return "LOAD/S (EWMA " + shortDuration(lo) + "-" + shortDuration(hi) + ")"
}

// shortDuration prints d without its zero trailing units: 1m, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
