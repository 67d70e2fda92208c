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

// normalize shortens an error for a tally: digits go, so that errors
// that differ in numbers only count together.
func normalize(s string) string {
	b := []byte(s)
	out := b[:0]
	for i, c := range b {
		if c >= '0' && c <= '9' {
			if i > 0 && b[i-1] >= '0' && b[i-1] <= '9' {
				continue
			}
			c = 'N'
		}
		out = append(out, c)
	}
	if len(out) > 160 {
		out = append(out[:157], "..."...)
	}
	return string(out)
}
