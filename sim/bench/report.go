package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Report is the outcome of a run.
type Report struct {
	// Sections are the comparisons' tables, in the order of Comparisons.
	Sections []Section
	// Command is the command line that produced the report, if known.
	Command string
	// Start, Wall and the load averages (1 minute, from /proc/loadavg) at
	// the start and the end describe the run.
	Start              time.Time
	Wall               time.Duration
	LoadStart, LoadEnd float64
	// CPUs is runtime.NumCPU; Rounds the rounds of the comparisons.
	CPUs, Rounds int
	// Quick reports a -quick run.
	Quick bool
}

// Section is one comparison's table.
type Section struct {
	// Key is the comparison's name (one of Comparisons).
	Key string
	// Title and Intro head the table; Notes follow it.
	Title, Intro string
	// Unit is what Value counts, for the column header.
	Unit string
	// RatioHeader heads the ratio column ("x tenure" if empty).
	RatioHeader string
	Rows        []Row
	Notes       []string
}

// Row is one implementation's figure.
type Row struct {
	// Name names the implementation.
	Name string
	// Value is the median over the rounds (or the computed figure).
	Value float64
	// Allocs is allocations per operation, or -1 when not measured.
	Allocs float64
	// Ratio is Value over the reference row's Value (or, where the
	// section says so, another ratio). It is always finite.
	Ratio float64
	// Samples is how many rounds Value is the median of; 0 for a computed
	// figure.
	Samples int
	// Min and Max are the extremes of the rounds' samples, when the
	// section's rows come from interleaved rounds (else both 0).
	Min, Max float64
	// Note is printed beside the row.
	Note string
}

// Rows returns every row of every section, for checks.
func (r *Report) Rows() []Row {
	var rows []Row
	for _, s := range r.Sections {
		rows = append(rows, s.Rows...)
	}
	return rows
}

// candidate is one implementation in an interleaved comparison: run takes
// one sample (in the comparison's unit).
type candidate struct {
	name string
	run  func(ctx context.Context) (float64, error)
}

// interleave runs every candidate once per round, rotating which one goes
// first, and returns each candidate's samples.
func interleave(ctx context.Context, rounds int, cands []candidate) ([][]float64, error) {
	samples := make([][]float64, len(cands))
	for r := range rounds {
		for j := range cands {
			i := (r + j) % len(cands)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			v, err := cands[i].run(ctx)
			if err != nil {
				return nil, err
			}
			samples[i] = append(samples[i], v)
		}
	}
	return samples, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count), NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0..100) of sorted durations, by
// nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ratio returns a/b, or 0 when it would not be finite.
func ratio(a, b float64) float64 {
	r := a / b
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return r
}

// rowsFrom builds a section's rows from interleaved samples; ref is the
// index of the reference candidate.
func rowsFrom(cands []candidate, samples [][]float64, ref int) []Row {
	rows := make([]Row, len(cands))
	refMed := median(samples[ref])
	for i, c := range cands {
		m := median(samples[i])
		rows[i] = Row{Name: c.name, Value: m, Allocs: -1, Ratio: ratio(m, refMed), Samples: len(samples[i]),
			Min: slices.Min(samples[i]), Max: slices.Max(samples[i])}
	}
	return rows
}

// membersText is "1 etcd member" or "3 etcd members".
func membersText(n int) string {
	if n == 1 {
		return "1 etcd member"
	}
	return fmt.Sprintf("%d etcd members", n)
}
