package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/proctest"
)

// deployRow is one run of TestRollingRestartWarm: a dialect, prepare on or
// off.
type deployRow struct {
	dialect                      string
	prepare                      bool
	steady, deploy, moves, after latencySummary
	steadyParts                  []time.Duration // the p99 of each part of the steady window
	deployTook                   time.Duration
	hitRate, hits, cold          float64
	full, catchup                float64
	failed                       int
	rate                         float64 // the open loop's calls per second; 0: a closed loop
	naptime                      string  // PostgreSQL: the server's autovacuum_naptime
}

// deployTable collects the rows of the subtests, which may run one after
// another only (they share the machine's CPU with the processes they run),
// and prints them as one table.
type deployTable struct {
	mu   sync.Mutex
	rows []deployRow
}

func (t *deployTable) add(r deployRow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

// String prints one line per window of each run: n, p50, p99, max in ms,
// and the p50, p99 and max over the steady window's; then per run the
// steady window's stability (the spread of its parts' p99), the deploy's
// duration, the hit rate and the loads.
func (t *deployTable) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
	ratio := func(a, b time.Duration) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(a)/float64(b))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-7s %-6s %7s %7s %7s %8s  %6s %6s %6s\n", "dialect", "prepare", "window", "n", "p50ms", "p99ms", "maxms", "p50/st", "p99/st", "max/st")
	for _, r := range t.rows {
		for _, w := range []struct {
			name string
			s    latencySummary
		}{{"steady", r.steady}, {"deploy", r.deploy}, {"moves", r.moves}, {"after", r.after}} {
			fmt.Fprintf(&b, "%-8s %-7v %-6s %7d %7s %7s %8s  %6s %6s %6s\n", r.dialect, r.prepare, w.name, w.s.n, ms(w.s.p50), ms(w.s.p99), ms(w.s.max),
				ratio(w.s.p50, r.steady.p50), ratio(w.s.p99, r.steady.p99), ratio(w.s.max, r.steady.max))
		}
	}
	fmt.Fprintf(&b, "%-8s %-7s %-32s %9s %9s %7s %7s %6s %6s\n", "dialect", "prepare", "steady p99 by part (ms)", "p99spread", "deploy", "hitrate", "cold", "full", "catch")
	for _, r := range t.rows {
		parts := make([]string, len(r.steadyParts))
		for i, p := range r.steadyParts {
			parts[i] = ms(p)
		}
		spread := "-"
		if len(r.steadyParts) > 0 {
			spread = ratio(slices.Max(r.steadyParts), slices.Min(r.steadyParts))
		}
		fmt.Fprintf(&b, "%-8s %-7v %-32s %9s %9v %7.4f %7.0f %6.0f %6.0f\n", r.dialect, r.prepare, strings.Join(parts, " "), spread,
			r.deployTook.Round(time.Millisecond), r.hitRate, r.cold, r.full, r.catchup)
		if r.rate > 0 {
			fmt.Fprintf(&b, "  load: an open loop of %.0f increments per second (TENURE_DEPLOY_UTIL of what %d workers sustain closed)\n", r.rate, testWorkers)
		}
		if r.naptime != "" {
			fmt.Fprintf(&b, "  autovacuum_naptime %s: the server vacuums the counters' dead row versions at most that often (at a minute, the steady p99 steps when it does)\n", r.naptime)
		}
		if r.failed > 0 {
			fmt.Fprintf(&b, "  %d increments failed at the client\n", r.failed)
		}
	}
	return b.String()
}

// traceRestarts logs, for each restart, the times of its SIGTERM, the
// leaving process's exit and the fleet serving everything again, the
// longest time around them in which no increment completed (a stall of
// the whole fleet, as the client sees it), and the slowest increments
// begun then, each with when it began and ended relative to the exit.
func traceRestarts(t *testing.T, samples []sample, restarts []restart) {
	t.Helper()
	for _, r := range restarts {
		from, to := r.term.Add(-200*time.Millisecond), r.settled.Add(500*time.Millisecond)
		var in []sample
		var done []time.Time
		for _, s := range samples {
			end := s.began.Add(s.took)
			if end.After(from) && s.began.Before(to) {
				in = append(in, s)
				done = append(done, end)
			}
		}
		slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
		var gap time.Duration
		var gapAt time.Time
		for i := 1; i < len(done); i++ {
			if g := done[i].Sub(done[i-1]); g > gap {
				gap, gapAt = g, done[i-1]
			}
		}
		rel := func(at time.Time) string {
			return fmt.Sprintf("%+.1fms", float64(at.Sub(r.exited))/float64(time.Millisecond))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "restart of %s, times relative to its exit: SIGTERM %s, exit %s, fleet serving %s; longest time with no increment completed %.1fms from %s\n",
			r.id, rel(r.term), r.exited.Format("15:04:05.000"), rel(r.settled), float64(gap)/float64(time.Millisecond), rel(gapAt))
		slices.SortFunc(in, func(a, b sample) int { return int(b.took - a.took) })
		for _, s := range in[:min(len(in), 12)] {
			fmt.Fprintf(&b, "  took %6.1fms, began %s, ended %s\n", float64(s.took)/float64(time.Millisecond), rel(s.began), rel(s.began.Add(s.took)))
		}
		t.Log(b.String())
	}
}

// logColdMoves logs what the processes' logs say of the moves that went
// cold with --prepare: the handoffs with cold partitions, the acquisitions
// with partitions not prepared, failed preparations, lost sessions, since
// the deploy began.
func logColdMoves(t *testing.T, procs []*proctest.Proc, since time.Time) {
	t.Helper()
	for _, p := range procs {
		var lines []string
		for _, prefix := range []string{"released ", "acquired ", "prepare failed", "session lost"} {
			for _, l := range p.FindPrefix(prefix) {
				if at, err := time.Parse(time.RFC3339Nano, l.Str("@timestamp")); err == nil && at.Before(since) {
					continue
				}
				cold, _ := l["cold"].(float64)
				count, _ := l["count"].(float64)
				prepared, hasPrepared := l["prepared"].(float64)
				if cold > 0 || (hasPrepared && prepared < count) || !strings.HasPrefix(prefix, "released") && !strings.HasPrefix(prefix, "acquired") {
					lines = append(lines, fmt.Sprintf("%v %s %v", l["@timestamp"], l.Msg(), l))
				}
			}
		}
		if len(lines) > 0 {
			t.Logf("moves of %s that went cold:\n%s", p.ID, strings.Join(lines, "\n"))
		}
	}
}
