package simulation

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

// Totals aggregates the runs of one strategy: a row of the table.
type Totals struct {
	Strategy            Strategy
	Runs, FailedRuns    int
	Operations          int
	StaleWritesAccepted int
	LostUpdates         int64
	DoubleExecutions    int
	EpochRegressions    int
	NotLinearizable     int
	LivenessViolations  int
	UnownedSeconds      float64
	// MaxUnownedAfterHeal is the longest a partition stayed unowned after
	// the last fault healed, over every run.
	MaxUnownedAfterHeal time.Duration
	Failovers           []time.Duration
	Virtual, Wall       time.Duration
	// Pauses and Hangs count the process pauses and hung release
	// callbacks that happened.
	Pauses, Hangs int
	// Refused counts the writes refused as stale.
	Refused int
	// FloorRaises counts the floors raised by a writer outside the fleet.
	FloorRaises int
	// Resizes, Migrations, Interrupted and Aborted count the shape
	// changes of the fleet (Result); Compared the comparisons of readers
	// at a revision and Disagreements the keys they disagreed on.
	Resizes, Migrations, Interrupted, Aborted int
	Compared, Disagreements                   int
	// Handovers, HandoversRefused, KilledBefore, KilledBeforeRefused,
	// KilledAfter and KilledAfterServed count the hand-overs of claims
	// and the successors stopped in the middle of one (Result).
	Handovers, HandoversRefused, KilledBefore, KilledBeforeRefused, KilledAfter, KilledAfterServed int
	// Failed lists the replay commands of failing runs.
	Failed []string
	// live: the strategy's runs were checked for liveness.
	live bool
}

// Add counts one run.
func (t *Totals) Add(r *Result) {
	s := r.Report.Summary()
	t.Runs++
	t.Operations += s.Operations
	t.StaleWritesAccepted += s.StaleWritesAccepted
	t.LostUpdates += s.LostUpdates
	t.DoubleExecutions += s.DoubleExecutions
	t.EpochRegressions += s.EpochRegressions
	if s.Linearizable == "no" {
		t.NotLinearizable++
	}
	if r.Report.Liveness != nil {
		t.live = true
		t.LivenessViolations += len(r.Report.Liveness.Violations)
	}
	t.UnownedSeconds += s.UnownedPartitionSeconds
	t.MaxUnownedAfterHeal = max(t.MaxUnownedAfterHeal, s.MaxUnownedAfterHeal)
	t.Failovers = append(t.Failovers, r.Report.Failovers...)
	t.Virtual += r.Virtual
	t.Pauses += r.Pauses
	t.Hangs += r.Hangs
	t.Refused += r.Refused
	t.FloorRaises += r.FloorRaises
	t.Wall += r.Wall
	t.Resizes += r.Resizes
	t.Migrations += r.Migrations
	t.Interrupted += r.Interrupted
	t.Aborted += r.Aborted
	t.Compared += r.Compared
	t.Disagreements += r.Disagreements
	t.Handovers += r.Handovers
	t.HandoversRefused += r.HandoversRefused
	t.KilledBefore += r.SuccessorsKilledBefore
	t.KilledBeforeRefused += r.KilledBeforeRefused
	t.KilledAfter += r.SuccessorsKilledAfter
	t.KilledAfterServed += r.KilledAfterServed
	if !r.OK() {
		t.FailedRuns++
		t.Failed = append(t.Failed, r.Command())
	}
}

// Violations is the number of safety violations counted.
func (t *Totals) Violations() int64 {
	return int64(t.StaleWritesAccepted+t.DoubleExecutions+t.EpochRegressions+t.NotLinearizable+t.Disagreements) + t.LostUpdates
}

// RunSeeds runs seeds [first, first+n) of each strategy on parallel
// goroutines and returns one Totals per strategy, in order. progress, if
// not nil, is called after every run.
func RunSeeds(base Config, strategies []Strategy, first uint64, n, parallel int, progress func(*Result)) ([]*Totals, error) {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	type job struct {
		st   Strategy
		seed uint64
	}
	jobs := make(chan job)
	totals := make([]*Totals, len(strategies))
	for i, st := range strategies {
		totals[i] = &Totals{Strategy: st}
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for j := range jobs {
				cfg := base
				cfg.Seed, cfg.Strategy = j.seed, j.st
				r, err := Run(cfg)
				mu.Lock()
				if err != nil {
					firstErr = cmpErr(firstErr, err)
				} else {
					totals[slices.Index(strategies, j.st)].Add(r)
					if progress != nil {
						progress(r)
					}
				}
				mu.Unlock()
			}
		})
	}
	for s := first; s < first+uint64(n); s++ {
		for _, st := range strategies {
			jobs <- job{st, s}
		}
	}
	close(jobs)
	wg.Wait()
	for _, t := range totals {
		slices.Sort(t.Failovers)
		slices.Sort(t.Failed)
	}
	return totals, firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// WriteMarkdown writes the per-strategy table.
func WriteMarkdown(w io.Writer, totals []*Totals) error {
	var b strings.Builder
	b.WriteString("| strategy | runs | operations | stale writes accepted | lost updates | double executions | epoch regressions | runs not linearizable | partition-seconds unowned | max unowned after heal | liveness violations | failover p50 | failover p99 | failing runs |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range totals {
		unowned, maxGap, live, p50, p99 := "n/a", "n/a", "n/a", "n/a", "n/a"
		if t.live {
			unowned = fmt.Sprintf("%.1f", t.UnownedSeconds)
			maxGap = t.MaxUnownedAfterHeal.String()
			live = fmt.Sprint(t.LivenessViolations)
			p50 = check.Percentile(t.Failovers, 50).String()
			p99 = check.Percentile(t.Failovers, 99).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %d |\n",
			t.Strategy, t.Runs, t.Operations, t.StaleWritesAccepted, t.LostUpdates, t.DoubleExecutions,
			t.EpochRegressions, t.NotLinearizable, unowned, maxGap, live, p50, p99, t.FailedRuns)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
