package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/check"
)

// Report is what a run did and what the checks found.
type Report struct {
	Config Config
	// Wall is the whole run's wall time; LoadWall the time load ran.
	Wall, LoadWall time.Duration
	// Faults lists the faults as they happened.
	Faults []string
	// FaultCounts counts the faults injected per kind.
	FaultCounts map[FaultKind]int
	// Check is sim/check's report; Summary its one-line form.
	Check   *check.Report
	Summary check.Summary
	// Violations lists every violation: the checkers', then anomalies of
	// the store's log (a write no worker announced, an acknowledged write
	// missing) and workers that exited on their own.
	Violations []string

	// Client operations.
	Increments, Acked, Unknown, Reads, ReadsOK int64
	// IncrLatency are the p50 and p99 of acknowledged increments, retries
	// included.
	IncrP50, IncrP99 time.Duration
	ClientStats      router.ClientStats

	// Write attempts as the workers reported them, and how many of those
	// whose outcome was unknown etcd's log shows applied.
	Writes, Accepted, Stale, Conflicts, UnknownWrites, UnknownApplied int
	// UnknownWriteErrors and UnknownIncrErrors tally the errors of writes
	// and of client increments whose outcome was unknown.
	UnknownWriteErrors, UnknownIncrErrors map[string]int
	// PausedWrites are the outcomes of the writes whose worker a pause
	// stopped between their read and their write: each should be refused
	// as stale (the pause outlasts the TTL).
	PausedWrites []string
	// PausedRefused counts those refused as stale.
	PausedRefused int
	// Tenures begun.
	Tenures int

	// Failovers: for each partition a worker held when a fault cut it off
	// (pause, kill, blackhole), the time from the fault to the partition's
	// next tenure. Handoffs: for each tenure that ended by a planned move
	// (moved, closed), the time from its end to the next tenure. Sorted.
	Failovers, Handoffs []time.Duration
	// NotReowned counts partitions a faulted worker held that nobody held
	// again before the run ended.
	NotReowned int
	// Sessions lost, by cause: a fault of the worker itself, an etcd
	// leader fault (the outage bound should cover these), or nothing the
	// run injected.
	LostByWorkerFault, LostByEtcdFault, LostOther int
}

// OK reports whether the run found no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func newReport(cfg Config, f *fleet, l *load, h *check.History, cr *check.Report, faults []faultRecord, anomalies []string, unknownApplied int) *Report {
	r := &Report{Config: cfg, Check: cr, Summary: cr.Summary(), FaultCounts: make(map[FaultKind]int)}
	for _, fr := range faults {
		if fr.Err == nil {
			r.FaultCounts[fr.Kind]++
		}
	}
	r.Violations = append(r.Violations, cr.Violations()...)
	r.Violations = append(r.Violations, anomalies...)
	f.mu.Lock()
	r.Violations = append(r.Violations, f.exits...)
	n := f.counts
	reasons := f.reasons
	losses := slices.Clone(f.losses)
	r.UnknownWriteErrors = maps.Clone(f.unknownErrs)
	for _, p := range f.paused {
		s := p.what + ": " + p.outcome
		if p.err != "" {
			s += " (" + p.err + ")"
		}
		r.PausedWrites = append(r.PausedWrites, s)
		if p.outcome == "stale" {
			r.PausedRefused++
		}
	}
	f.mu.Unlock()
	r.Writes, r.Accepted, r.Stale, r.Conflicts, r.UnknownWrites = n.writes, n.accepted, n.stale, n.conflicts, n.unknown
	r.UnknownApplied = unknownApplied
	r.Tenures = n.acquired
	r.Increments, r.Acked, r.Unknown = l.incrs.Load(), l.acked.Load(), l.unknown.Load()
	r.Reads, r.ReadsOK = l.reads.Load(), l.readsOK.Load()
	l.latMu.Lock()
	lat := slices.Clone(l.latencies)
	r.UnknownIncrErrors = maps.Clone(l.errs)
	l.latMu.Unlock()
	slices.Sort(lat)
	r.IncrP50, r.IncrP99 = check.Percentile(lat, 50), check.Percentile(lat, 99)

	// Tenures by scope, in epoch order.
	byScope := make(map[string][]check.Tenure)
	for _, t := range h.Tenures {
		byScope[t.Scope] = append(byScope[t.Scope], t)
	}
	for _, ts := range byScope {
		slices.SortFunc(ts, func(a, b check.Tenure) int { return int(a.Epoch - b.Epoch) })
	}
	next := func(t check.Tenure) (check.Tenure, bool) {
		for _, u := range byScope[t.Scope] {
			if u.Epoch > t.Epoch {
				return u, true
			}
		}
		return check.Tenure{}, false
	}
	for _, fr := range faults {
		if !fr.Kind.workerFault() || fr.Err != nil {
			continue
		}
		for _, t := range h.Tenures {
			if t.Holder != fr.Target || t.Start > fr.Start || t.End < fr.Start {
				continue
			}
			if u, ok := next(t); ok {
				r.Failovers = append(r.Failovers, max(0, u.Start-fr.Start))
			} else {
				r.NotReowned++
			}
		}
	}
	for _, t := range h.Tenures {
		reason := reasons[tenureID{t.Scope, t.Epoch, t.Holder}]
		if t.End == check.Never || (reason != "moved" && reason != "closed") {
			continue
		}
		if u, ok := next(t); ok {
			r.Handoffs = append(r.Handoffs, max(0, u.Start-t.End))
		}
	}
	slices.Sort(r.Failovers)
	slices.Sort(r.Handoffs)

	// One session loss per worker per second.
	slices.SortFunc(losses, func(a, b loss) int { return strings.Compare(a.worker, b.worker)*2 + sign(a.at-b.at) })
	slack := 2*cfg.TTL + time.Second
	etcdLoss := make(map[int][]string) // fault index -> workers that lost their session during it
	for i, ls := range losses {
		if i > 0 && losses[i-1].worker == ls.worker && ls.at-losses[i-1].at < time.Second {
			continue
		}
		cause, during := 0, -1
		for fi, fr := range faults {
			if ls.at < fr.Start || ls.at > fr.Healed+slack {
				continue
			}
			if fr.Kind.workerFault() && fr.Target == ls.worker {
				cause = 1
				break
			}
			if !fr.Kind.workerFault() {
				cause, during = 2, fi
			}
		}
		switch cause {
		case 1:
			r.LostByWorkerFault++
		case 2:
			r.LostByEtcdFault++
			if !slices.Contains(etcdLoss[during], ls.worker) {
				etcdLoss[during] = append(etcdLoss[during], ls.worker)
			}
		default:
			r.LostOther++
		}
	}
	for fi, fr := range faults {
		line := fr.String()
		if who := etcdLoss[fi]; len(who) > 0 {
			line += " (sessions lost: " + strings.Join(who, ", ") + ")"
		}
		r.Faults = append(r.Faults, line)
	}
	return r
}

func sign(d time.Duration) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Distribution renders n, p50, p99 and max of sorted ds.
func distribution(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("%d: p50 %s, p99 %s, max %s", len(ds), ms(check.Percentile(ds, 50)), ms(check.Percentile(ds, 99)), ms(check.Percentile(ds, 100)))
}

// WriteMarkdown writes the report as a markdown table, the faults and the
// violations.
func (r *Report) WriteMarkdown(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	var kinds []string
	for _, k := range FaultKinds() {
		if n := r.FaultCounts[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
	}
	s := r.Summary
	verdict := "OK"
	if !r.OK() {
		verdict = fmt.Sprintf("FAIL (%d violations)", len(r.Violations))
	}
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| chaos run | |\n|---|---|\n")
	row("setup", fmt.Sprintf("seed %d; %d worker processes, 3 etcd member processes, %d partitions, %d keys, %d clients, TTL %v, %v of load",
		c.Seed, c.Workers, c.Partitions, c.Keys, c.Clients, c.TTL, r.LoadWall.Round(time.Millisecond)))
	row("faults", fmt.Sprintf("%d: %s", len(r.Faults), strings.Join(kinds, ", ")))
	row("increments", fmt.Sprintf("%d sent, %d acknowledged, %d unknown (latency p50 %v, p99 %v)",
		r.Increments, r.Acked, r.Unknown, r.IncrP50.Round(time.Millisecond), r.IncrP99.Round(time.Millisecond)))
	row("reads", fmt.Sprintf("%d sent, %d answered", r.Reads, r.ReadsOK))
	row("client", fmt.Sprintf("%d attempts, %d retries", r.ClientStats.Attempts, r.ClientStats.Retries))
	row("writes", fmt.Sprintf("%d attempted: %d accepted, %d refused stale, %d refused version conflict, %d unknown (%d of them applied per etcd's log)",
		r.Writes, r.Accepted, r.Stale, r.Conflicts, r.UnknownWrites, r.UnknownApplied))
	row("writes held across a pause (worker stopped between read and write)", fmt.Sprintf("%d, %d of them refused stale", len(r.PausedWrites), r.PausedRefused))
	row("**stale writes accepted**", fmt.Sprintf("**%d**", s.StaleWritesAccepted))
	row("**double executions** (writers per partition and epoch, interleaved tenures)", fmt.Sprintf("**%d**", s.DoubleExecutions))
	row("**epoch regressions**", fmt.Sprintf("**%d** (%d tenures)", s.EpochRegressions, r.Tenures))
	row("**acknowledged updates lost or applied twice**", fmt.Sprintf("**%d** (%d acknowledged increments and writes checked)", s.LostUpdates, r.Check.Lost.Acknowledged))
	row("**linearizable** (porcupine, per key)", fmt.Sprintf("**%s** (%d keys, %d operations)", s.Linearizable, r.Check.Linear.Keys, r.Check.Linear.Ops))
	row("failover after a worker fault (fault to next tenure)", distribution(r.Failovers)+notReowned(r.NotReowned))
	row("planned handoff (release to next tenure)", distribution(r.Handoffs))
	row("sessions lost", fmt.Sprintf("%d by the worker's own fault, %d during etcd leader faults, %d otherwise", r.LostByWorkerFault, r.LostByEtcdFault, r.LostOther))
	row("wall time", r.Wall.Round(time.Millisecond).String())
	row("verdict", verdict)
	b.WriteString("\nFaults:\n\n")
	for _, f := range r.Faults {
		b.WriteString("    " + f + "\n")
	}
	if len(r.PausedWrites) > 0 {
		b.WriteString("\nWrites held across a pause:\n\n")
		for _, p := range r.PausedWrites {
			b.WriteString("    " + p + "\n")
		}
	}
	tally(&b, "Writes of unknown outcome, by error", r.UnknownWriteErrors)
	tally(&b, "Increments of unknown outcome, by error", r.UnknownIncrErrors)
	if len(r.Violations) > 0 {
		b.WriteString("\nViolations:\n\n")
		for i, v := range r.Violations {
			if i == 30 {
				fmt.Fprintf(&b, "- ... %d more\n", len(r.Violations)-i)
				break
			}
			b.WriteString("- " + v + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func notReowned(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d not held again)", n)
}

// tally writes a titled list of counts, largest first.
func tally(b *strings.Builder, title string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(x, y string) int {
		if m[x] != m[y] {
			return m[y] - m[x]
		}
		return strings.Compare(x, y)
	})
	fmt.Fprintf(b, "\n%s:\n\n", title)
	for _, k := range keys {
		fmt.Fprintf(b, "    %4d  %s\n", m[k], k)
	}
}
