package check

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config says which checks All runs beyond the always-on safety checks.
// The zero Config runs the safety checks and the linearizability check
// without limits, and skips liveness.
type Config struct {
	// Linear tunes the linearizability check.
	Linear LinearConfig
	// Liveness, if not nil, is checked; nil skips the liveness check.
	Liveness *LivenessSpec
	// KeyEpochs says that the epochs of every scope are drawn from one
	// sequence (etcd revisions, as tenure's are), so that a key written
	// under several scopes (its partition split or merged) orders its
	// writes by epoch across them: the stale check then also counts a
	// write applied after a write to the same key under a higher epoch of
	// any scope (StaleWritesByKey).
	KeyEpochs bool
}

// Report is everything All found.
type Report struct {
	Stale    StaleResult
	Double   DoubleResult
	Epochs   EpochResult
	Lost     LostResult
	Linear   LinearResult
	Liveness *LivenessResult // nil when not checked
	// Failovers are the failover times, as Failovers returns them, sorted.
	Failovers []time.Duration
	// Writes and Ops count what the history held.
	Writes, Ops int
}

// All validates h and runs every checker on it. The error is for a history
// or configuration that cannot be checked (it wraps ErrInvalidHistory for
// the former); violations are in the Report.
func All(h *History, cfg Config) (*Report, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		h = &History{}
	}
	r := &Report{Writes: len(h.Writes), Ops: len(h.Ops)}
	var err error
	stale := StaleWrites
	if cfg.KeyEpochs {
		stale = StaleWritesByKey
	}
	if r.Stale, err = stale(h); err != nil {
		return nil, err
	}
	if r.Double, err = DoubleExecutions(h); err != nil {
		return nil, err
	}
	if r.Epochs, err = Epochs(h); err != nil {
		return nil, err
	}
	if r.Lost, err = LostUpdates(h); err != nil {
		return nil, err
	}
	if r.Linear, err = Linearizable(h, cfg.Linear); err != nil {
		return nil, err
	}
	if cfg.Liveness != nil {
		l, err := Liveness(h, *cfg.Liveness)
		if err != nil {
			return nil, err
		}
		r.Liveness = &l
	}
	r.Failovers = Failovers(h)
	slices.Sort(r.Failovers)
	return r, nil
}

// Safe reports whether the run broke no safety property: no stale write,
// double execution, epoch regression or lost update, and every key
// linearizable (a key that timed out counts as not proven).
func (r *Report) Safe() bool {
	return r.Stale.OK() && r.Double.OK() && r.Epochs.OK() && r.Lost.OK() && r.Linear.OK()
}

// OK reports whether the run is safe and, if liveness was checked, live.
func (r *Report) OK() bool {
	return r.Safe() && (r.Liveness == nil || r.Liveness.OK())
}

// Violations lists every violation in words, safety first.
func (r *Report) Violations() []string {
	var out []string
	for _, v := range r.Stale.Violations {
		out = append(out, v.String())
	}
	for _, v := range r.Double.SameEpoch {
		out = append(out, v.String())
	}
	for _, v := range r.Double.Interleaved {
		out = append(out, v.String())
	}
	for _, v := range r.Epochs.Violations {
		out = append(out, v.String())
	}
	for _, v := range r.Lost.Violations {
		out = append(out, v.String())
	}
	for _, v := range r.Linear.Illegal {
		out = append(out, "not linearizable: "+v.String())
	}
	for _, v := range r.Linear.Unknown {
		out = append(out, "linearizability unknown (timed out): "+v.String())
	}
	if r.Liveness != nil {
		for _, v := range r.Liveness.Violations {
			out = append(out, "unowned past the bound after heal: "+v.String())
		}
	}
	return out
}

// Summary is one run in numbers: a row of the simulator's per-strategy
// table.
type Summary struct {
	// Operations counts write attempts plus client operations.
	Operations          int
	StaleWritesAccepted int
	// LostUpdates counts acknowledged updates lost or applied twice.
	LostUpdates      int64
	DoubleExecutions int
	EpochRegressions int
	// UnownedPartitionSeconds and MaxUnownedAfterHeal come from the
	// liveness check (zero if it did not run).
	UnownedPartitionSeconds float64
	MaxUnownedAfterHeal     time.Duration
	// Failover times over every handoff.
	FailoverP50, FailoverP99, FailoverMax time.Duration
	// Linearizable is "yes", "no" or "unknown" (some key timed out).
	Linearizable string
}

// Summary condenses the report.
func (r *Report) Summary() Summary {
	s := Summary{
		Operations:          r.Writes + r.Ops,
		StaleWritesAccepted: len(r.Stale.Violations),
		LostUpdates:         r.Lost.Lost(),
		DoubleExecutions:    r.Double.Count(),
		EpochRegressions:    len(r.Epochs.Violations),
		FailoverP50:         Percentile(r.Failovers, 50),
		FailoverP99:         Percentile(r.Failovers, 99),
		FailoverMax:         Percentile(r.Failovers, 100),
	}
	switch r.Linear.Result {
	case porcupine.Ok:
		s.Linearizable = "yes"
	case porcupine.Illegal:
		s.Linearizable = "no"
	default:
		s.Linearizable = "unknown"
	}
	if r.Liveness != nil {
		s.UnownedPartitionSeconds = r.Liveness.Unowned.Seconds()
		s.MaxUnownedAfterHeal = r.Liveness.MaxGapAfterHeal
	}
	return s
}

// SummaryHeader names the columns of Summary.Row.
func SummaryHeader() []string {
	return []string{"operations", "stale writes accepted", "lost updates", "double executions",
		"epoch regressions", "partition-seconds unowned", "max unowned after heal",
		"failover p50", "failover p99", "failover max", "linearizable"}
}

// Row renders s as the cells of a table row, in SummaryHeader's order.
func (s Summary) Row() []string {
	return []string{
		strconv.Itoa(s.Operations),
		strconv.Itoa(s.StaleWritesAccepted),
		strconv.FormatInt(s.LostUpdates, 10),
		strconv.Itoa(s.DoubleExecutions),
		strconv.Itoa(s.EpochRegressions),
		strconv.FormatFloat(s.UnownedPartitionSeconds, 'f', 3, 64),
		s.MaxUnownedAfterHeal.String(),
		s.FailoverP50.String(),
		s.FailoverP99.String(),
		s.FailoverMax.String(),
		s.Linearizable,
	}
}

func (s Summary) String() string {
	return fmt.Sprintf("ops=%d stale=%d lost=%d double=%d epochs=%d unowned=%.3fs maxgap=%v failover p50=%v p99=%v max=%v linearizable=%s",
		s.Operations, s.StaleWritesAccepted, s.LostUpdates, s.DoubleExecutions, s.EpochRegressions,
		s.UnownedPartitionSeconds, s.MaxUnownedAfterHeal, s.FailoverP50, s.FailoverP99, s.FailoverMax, s.Linearizable)
}

// Percentile returns the p-th percentile (nearest rank, 0 < p <= 100) of
// sorted ds, or 0 if ds is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
