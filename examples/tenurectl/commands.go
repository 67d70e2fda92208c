package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// command runs one subcommand with its arguments (after the command name).
type command func(g *globals, args []string, out io.Writer) error

var commands = map[string]command{
	"fleets":        cmdFleets,
	"spec":          cmdSpec,
	"members":       cmdMembers,
	"partitions":    cmdPartitions,
	"owner-of":      cmdOwnerOf,
	"leaders":       cmdLeaders,
	"status":        cmdStatus,
	"force-release": cmdForceRelease,
	"drain":         cmdDrain,
	"undrain":       cmdUndrain,
	"audit":         cmdAudit,
	"pin":           cmdPin,
	"unpin":         cmdUnpin,
	"placement":     cmdPlacement,
	"balance":       cmdBalance,
	"rewind-check":  cmdRewindCheck,
}

// noArgs parses a command that takes only flags.
func noArgs(name string, g *globals, args []string) error {
	pos, err := parse(flag.NewFlagSet(name, flag.ContinueOnError), g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// do connects to the fleet and runs f under the session, then prints its
// result (see emit). An error that says the fleet has no spec names the
// fleets that exist.
func do[T any](g *globals, out io.Writer, f func(*session) (T, error), text func(io.Writer, T)) error {
	s, err := connect(g)
	if err != nil {
		return err
	}
	defer s.close()
	v, err := f(s)
	switch {
	case errors.Is(err, fleet.ErrNoSpec) && s.ctx.Err() == nil:
		return missingSpec(s, err)
	case err != nil:
		return s.wrap(err)
	}
	return emit(g, out, v, text)
}

// emit prints v with text, or as JSON with --json.
func emit[T any](g *globals, out io.Writer, v T, text func(io.Writer, T)) error {
	if g.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	text(tw, v)
	return tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func epoch(e int64) string {
	if e == 0 {
		return "-"
	}
	return strconv.FormatInt(e, 10)
}

func cmdMembers(g *globals, args []string, out io.Writer) error {
	if err := noArgs("members", g, args); err != nil {
		return err
	}
	return do(g, out, func(s *session) ([]fleet.MemberStatus, error) { return s.op.Members(s.ctx) },
		func(w io.Writer, ms []fleet.MemberStatus) {
			fmt.Fprintln(w, "ID\tADDR\tLEASE\tTTL LEFT\tDRAINED\tOWNED\tBUILD\tFEATURES")
			for _, m := range ms {
				ttl := "-"
				if m.TTLLeft >= 0 {
					ttl = time.Duration(m.TTLLeft).String()
				}
				drained := "no"
				if m.Drain != nil {
					drained = fmt.Sprintf("yes (%s: %s)", m.Drain.Actor, m.Drain.Reason)
				}
				fmt.Fprintf(w, "%s\t%s\t%x\t%s\t%s\t%d\t%s\t%s\n", m.ID, dash(m.Addr), m.Lease, ttl, drained, m.Owned, dash(m.Build), list(m.Features))
			}
		})
}

func printPartitions(w io.Writer, ps []fleet.PartitionStatus) {
	fmt.Fprintln(w, "PARTITION\tOWNER\tADDR\tEPOCH\tSINCE\tRING OWNER\tHANDOFF")
	for _, p := range ps {
		handoff := ""
		if p.Handoff {
			handoff = "yes"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Partition, dash(p.Owner), dash(p.Addr), epoch(p.Epoch), stamp(p.Since), dash(p.Next), handoff)
	}
}

func cmdPartitions(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("partitions", flag.ContinueOnError)
	node := fs.String("node", "", "only the partitions held by this node")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return do(g, out, func(s *session) ([]fleet.PartitionStatus, error) {
		ps, err := s.op.Partitions(s.ctx)
		if err != nil || *node == "" {
			return ps, err
		}
		mine := []fleet.PartitionStatus{}
		for _, p := range ps {
			if p.Owner == *node {
				mine = append(mine, p)
			}
		}
		return mine, nil
	}, printPartitions)
}

// ownerOf is owner-of's result: the key and its partition's status.
type ownerOf struct {
	Key string `json:"key"`
	fleet.PartitionStatus
}

func cmdOwnerOf(g *globals, args []string, out io.Writer) error {
	pos, err := parse(flag.NewFlagSet("owner-of", flag.ContinueOnError), g, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("owner-of takes one KEY")
	}
	return do(g, out, func(s *session) (ownerOf, error) {
		p, err := s.op.Lookup(s.ctx, pos[0])
		return ownerOf{Key: pos[0], PartitionStatus: p}, err
	}, func(w io.Writer, o ownerOf) {
		fmt.Fprintf(w, "key:\t%s\npartition:\t%d\nowner:\t%s\naddr:\t%s\nepoch:\t%s\nsince:\t%s\nring owner:\t%s\n",
			o.Key, o.Partition, dash(o.Owner), dash(o.Addr), epoch(o.Epoch), stamp(o.Since), dash(o.Next))
	})
}

func cmdLeaders(g *globals, args []string, out io.Writer) error {
	// After the command, --prefix is the elections' key prefix; the
	// fleet's --prefix then goes before the command.
	fs := flag.NewFlagSet("leaders", flag.ContinueOnError)
	var electionPrefix string
	fs.StringVar(&electionPrefix, "prefix", "", "elections' key prefix (default <fleet prefix>leader/)")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return do(g, out, func(s *session) ([]fleet.LeaderStatus, error) { return s.op.Leaders(s.ctx, electionPrefix) },
		func(w io.Writer, ls []fleet.LeaderStatus) {
			fmt.Fprintln(w, "ELECTION\tHOLDER\tEPOCH\tCANDIDATES\tKEY")
			for _, l := range ls {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", l.Election, dash(l.Holder), l.Epoch, l.Candidates, l.Key)
			}
		})
}

func cmdStatus(g *globals, args []string, out io.Writer) error {
	if err := noArgs("status", g, args); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.Status, error) { return s.op.Status(s.ctx) },
		func(w io.Writer, st fleet.Status) {
			settled := "no"
			if len(st.Unowned) == 0 && len(st.Handoffs) == 0 {
				settled = "yes"
			}
			fmt.Fprintf(w, "revision:\t%d\npartitions:\t%d\nring version:\t%d\nsettled:\t%s\n", st.Revision, st.Spec.Partitions, st.RingVersion, settled)
			fmt.Fprintf(w, "members:\t%s\ndrained:\t%s\nidle:\t%s\n", list(st.Members), list(st.Drained), list(st.Idle))
			fmt.Fprintf(w, "algorithm:\t%v\nfeatures:\t%s\nrequires:\t%s\n", st.Spec.RingAlgorithm, list(st.Features), list(st.Requires))
			if m := st.Migration; m != nil {
				fmt.Fprintf(w, "migration:\t%v -> %v, %d moves left, %d placed (by %s: %s)\n", m.From, m.Target, m.Moves, m.Placed, dash(m.Actor), dash(m.Reason))
			}
			ints := make([]string, len(st.Unowned))
			for i, p := range st.Unowned {
				ints[i] = strconv.Itoa(p)
			}
			fmt.Fprintf(w, "unowned:\t%s\n", list(ints))
			fmt.Fprintf(w, "handoffs:\t%d\n", len(st.Handoffs))
			for _, h := range st.Handoffs {
				fmt.Fprintf(w, "  partition %d:\t%s -> %s (epoch %d)\n", h.Partition, h.Owner, dash(h.Next), h.Epoch)
			}
			fmt.Fprintln(w, "owned:")
			for _, id := range st.Members {
				fmt.Fprintf(w, "  %s\t%d\n", id, st.Owned[id])
			}
			printAlarms(w, st.Alarms, "planned moves, operator actions and the balancer wait until it is disarmed")
		})
}

// printAlarms prints the alarms that stand in etcd, and what waits for
// them (waiting) if one does.
func printAlarms(w io.Writer, as []fleet.EtcdAlarm, waiting string) {
	if len(as) == 0 {
		fmt.Fprintln(w, "etcd alarms:\t-")
		return
	}
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Alarm + " (etcd member " + a.Member + ")"
	}
	fmt.Fprintf(w, "etcd alarms:\t%s: etcd refuses puts; %s\n", strings.Join(names, ", "), waiting)
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

// actionFlags registers --actor and --reason (and --epoch if withEpoch).
func actionFlags(fs *flag.FlagSet, withEpoch bool) *fleet.Action {
	a := &fleet.Action{}
	fs.StringVar(&a.Actor, "actor", defaultActor(), "who acts (default $USER@hostname)")
	fs.StringVar(&a.Reason, "reason", "", "why")
	if withEpoch {
		fs.Int64Var(&a.Epoch, "epoch", 0, "release only the holder of this epoch (default: the current one)")
	}
	return a
}

// refuse returns a usage error for an action the API would refuse without
// a reason or an actor, before connecting.
func refuse(a *fleet.Action, needReason bool) error {
	switch {
	case strings.TrimSpace(a.Actor) == "":
		return usageError{"--actor is empty: every audit record says who acted"}
	case needReason && strings.TrimSpace(a.Reason) == "":
		return usageError{"--reason is required: the audit record says why"}
	}
	return nil
}

// printRecord prints an action's audit record: holder is the node (or
// candidate) that held the target, pin node the node a pin or unpin names.
func printRecord(w io.Writer, r fleet.AuditRecord) {
	fmt.Fprintf(w, "action:\t%s\ntarget:\t%s\nactor:\t%s\nreason:\t%s\ntime:\t%s\nrevision:\t%d\n", r.Action, r.Target, r.Actor, dash(r.Reason), stamp(r.Time), r.Revision)
	if r.Action == "pin" || r.Action == "unpin" {
		fmt.Fprintf(w, "pin node:\t%s\nholder:\t%s\n", dash(r.Node), dash(r.Holder))
	} else if r.Holder != "" {
		fmt.Fprintf(w, "holder:\t%s\n", r.Holder)
	}
	if r.OldEpoch != 0 {
		fmt.Fprintf(w, "old epoch:\t%d\n", r.OldEpoch)
	}
}

func cmdForceRelease(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("force-release", flag.ContinueOnError)
	a := actionFlags(fs, true)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "partition" && pos[0] != "leader") {
		return usagef("usage: force-release partition P | leader NAME --reason R [--actor A] [--epoch E]")
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	scope := fence.LeaderScope(pos[1])
	if pos[0] == "partition" {
		p, err := strconv.Atoi(pos[1])
		if err != nil {
			return usagef("partition %q is not a number", pos[1])
		}
		scope = fence.PartitionScope(p)
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) { return s.op.ForceRelease(s.ctx, scope, *a) }, printRecord)
}

func cmdDrain(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	a := actionFlags(fs, false)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: drain NODE --reason R [--actor A]")
	}
	if err := refuse(a, true); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) { return s.op.Drain(s.ctx, pos[0], *a) }, printRecord)
}

func cmdUndrain(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("undrain", flag.ContinueOnError)
	a := actionFlags(fs, false)
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: undrain NODE [--reason R] [--actor A]")
	}
	if err := refuse(a, false); err != nil {
		return err
	}
	return do(g, out, func(s *session) (fleet.AuditRecord, error) { return s.op.Undrain(s.ctx, pos[0], *a) }, printRecord)
}

func cmdAudit(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	since := fs.Duration("since", 0, "only the actions of the last D (default: all)")
	pos, err := parse(fs, g, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *since < 0 {
		return usagef("--since %v must not be negative", *since)
	}
	var from time.Time
	if *since > 0 {
		from = time.Now().Add(-*since)
	}
	return do(g, out, func(s *session) ([]fleet.AuditRecord, error) { return s.op.Audit(s.ctx, from) },
		func(w io.Writer, rs []fleet.AuditRecord) {
			fmt.Fprintln(w, "TIME\tACTOR\tACTION\tTARGET\tHOLDER\tPIN NODE\tOLD EPOCH\tNEW EPOCH\tREASON")
			for _, r := range rs {
				target, node := r.Target, r.Node
				if resizeAction(r.Action) { // the record's node is the change of count, "from->to"
					target, node = r.Target+" "+r.Node, ""
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stamp(r.Time), r.Actor, r.Action, target, dash(r.Holder), dash(node),
					epoch(r.OldEpoch), epoch(r.NewEpoch), dash(r.Reason))
			}
		})
}
