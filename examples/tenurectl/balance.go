package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// This file holds the balancer's commands: balance suspend, balance resume
// and balance plan (the dry run).

// balanceCommands are the balance command's subcommands.
var balanceCommands = map[string]command{
	"suspend": func(g *globals, args []string, out io.Writer) error { return balanceAction(g, "suspend", args, out) },
	"resume":  func(g *globals, args []string, out io.Writer) error { return balanceAction(g, "resume", args, out) },
	"plan":    balancePlan,
}

func cmdBalance(g *globals, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usagef("usage: balance suspend|resume --reason R [--actor A] | balance plan [--upper U] [--lower L] [--budget B] [--cooldown D]")
	}
	if cmd, ok := balanceCommands[args[0]]; ok {
		return cmd(g, args[1:], out)
	}
	return usagef("unknown balance command %q: suspend, resume or plan", args[0])
}

func balanceAction(g *globals, verb string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("balance "+verb, flag.ContinueOnError)
	a := actionFlags(fs, false)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) {
		if verb == "suspend" {
			return s.op.SuspendBalancer(s.ctx, *a)
		}
		return s.op.ResumeBalancer(s.ctx, *a)
	}, printRecord)
}

// dryRun is balance plan's result: the pass the balancer would make now,
// and the configuration it was planned by. loadHeader names its loads.
type dryRun struct {
	*balance.Planned
	Config     planConfig `json:"config"`
	loadHeader string
}

// planConfig is the configuration of a dry run and where it came from:
// "last pass" (the configuration the last applied pass recorded),
// "defaults" (balance.DefaultConfig) and "flags" for those given. Its JSON
// gives Cooldown in seconds, as fleet.BalancerPass does.
type planConfig struct {
	Upper    float64       `json:"upper"`
	Lower    float64       `json:"lower"`
	Budget   float64       `json:"budget"`
	Cooldown time.Duration `json:"-"`
	From     string        `json:"source"`
}

// planConfigJSON is planConfig's JSON form.
type planConfigJSON struct {
	planConfigFields
	CooldownSeconds float64 `json:"cooldown_seconds"`
}

// planConfigFields is planConfig without its JSON methods.
type planConfigFields planConfig

// MarshalJSON encodes c with the cooldown in seconds.
func (c planConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(planConfigJSON{planConfigFields(c), c.Cooldown.Seconds()})
}

// UnmarshalJSON decodes MarshalJSON's form.
func (c *planConfig) UnmarshalJSON(b []byte) error {
	var v planConfigJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = planConfig(v.planConfigFields)
	c.Cooldown = time.Duration(v.CooldownSeconds * float64(time.Second))
	return nil
}

func balancePlan(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("balance plan", flag.ContinueOnError)
	var flags planConfig
	d := balance.DefaultConfig()
	fs.Float64Var(&flags.Upper, "upper", 0, fmt.Sprintf("upper band (default: the last pass's, else %v)", d.Upper))
	fs.Float64Var(&flags.Lower, "lower", 0, fmt.Sprintf("lower band (default: the last pass's, else %v)", d.Lower))
	fs.Float64Var(&flags.Budget, "budget", 0, fmt.Sprintf("fraction of the partitions a pass moves (default: the last pass's, else %v)", d.Budget))
	fs.DurationVar(&flags.Cooldown, "cooldown", 0, fmt.Sprintf("how long a moved partition stays (default: the last pass's, else %v)", d.Cooldown))
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return do(g, out, func(s *session) (dryRun, error) {
		rep, err := s.op.Placement(s.ctx) // the last pass, and the window of the loads
		if err != nil {
			return dryRun{}, err
		}
		cfg := planConfig{Upper: d.Upper, Lower: d.Lower, Budget: d.Budget, Cooldown: d.Cooldown, From: "defaults"}
		if lp := rep.Balancer.LastPass; lp != nil {
			cfg = planConfig{Upper: lp.Upper, Lower: lp.Lower, Budget: lp.Budget, Cooldown: time.Duration(lp.Cooldown), From: "last pass"}
		}
		if set["upper"] {
			cfg.Upper = flags.Upper
		}
		if set["lower"] {
			cfg.Lower = flags.Lower
		}
		if set["budget"] {
			cfg.Budget = flags.Budget
		}
		if set["cooldown"] {
			cfg.Cooldown = flags.Cooldown
		}
		if set["upper"] || set["lower"] || set["budget"] || set["cooldown"] {
			cfg.From += ", flags"
		}
		bc := balance.Config{Cluster: g.cluster, Prefix: g.prefix, Upper: cfg.Upper, Lower: cfg.Lower, Budget: cfg.Budget, Cooldown: cfg.Cooldown}
		if err := bc.Validate(); err != nil {
			return dryRun{}, usagef("%v", err)
		}
		b, err := balance.NewBalancer(s.cli, bc)
		if err != nil {
			return dryRun{}, err
		}
		pl, err := b.Plan(s.ctx)
		if err != nil {
			return dryRun{}, err
		}
		return dryRun{Planned: pl, Config: cfg, loadHeader: loadHeader(rep.Members)}, nil
	}, printDryRun)
}

func printDryRun(w io.Writer, d dryRun) {
	c := d.Config
	fmt.Fprintf(w, "revision:\t%d\nconfig:\tbands %v/%v, budget %v, cooldown %v (%s)\n", d.Rev, c.Upper, c.Lower, c.Budget, c.Cooldown, c.From)
	if s := d.Suspended; s != nil {
		fmt.Fprintf(w, "suspended:\tby %s: %s (%s); the next pass writes nothing\n", dash(s.Actor), dash(s.Reason), stamp(s.Time))
	}
	if len(d.Alarms) > 0 {
		printAlarms(w, d.Alarms, "the balancer pauses: the next pass writes nothing")
	}
	if d.Resizing != "" {
		fmt.Fprintf(w, "paused:\ta %s is in progress; passes write nothing until it ends\n", d.Resizing)
	}
	fmt.Fprintf(w, "imbalance:\t%.3f -> %.3f\n", d.Before, d.After)
	fmt.Fprintf(w, "\nMOVE PARTITION\tFROM\tTO\t%s\n", d.loadHeader)
	for _, m := range d.Moves {
		fmt.Fprintf(w, "%d\t%s\t%s\t%.3g\n", m.Partition, m.From, m.To, m.Load)
	}
	if len(d.Removes) > 0 {
		rs := make([]string, len(d.Removes))
		for i, p := range d.Removes {
			rs[i] = fmt.Sprint(p)
		}
		fmt.Fprintf(w, "\nremoves the moves of partitions:\t%s\n", strings.Join(rs, ", "))
	}
}

// printBalancer prints the balancer's state in the placement report.
func printBalancer(w io.Writer, st fleet.BalancerState) {
	if s := st.Suspended; s != nil {
		fmt.Fprintf(w, "balancer:\tsuspended by %s: %s (%s)\n", dash(s.Actor), dash(s.Reason), stamp(s.Time))
	} else {
		fmt.Fprintln(w, "balancer:\tnot suspended")
	}
	lp := st.LastPass
	if lp == nil {
		fmt.Fprintln(w, "last pass:\t-")
		return
	}
	fmt.Fprintf(w, "last pass:\trevision %d (snapshot %d, term %d) at %s: %d moves, %d removed, imbalance %.3f -> %.3f\n",
		lp.Revision, lp.Snapshot, lp.Term, stamp(lp.Time), len(lp.Moves), len(lp.Removed), lp.Before, lp.After)
	for _, m := range lp.Moves {
		fmt.Fprintf(w, "  partition %d:\t%s -> %s (load %.3g/s)\n", m.Partition, m.From, m.To, m.Load)
	}
}
