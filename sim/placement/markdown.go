package placement

import (
	"fmt"
	"io"
	"strings"

	"github.com/tenure-go/tenure/ownership/balance"
)

// weights names a row's weights.
func (r Row) weights() string {
	if r.Weighted {
		return "some 2"
	}
	return "equal"
}

// Summary is the row in one line.
func (r Row) Summary() string {
	return fmt.Sprintf("%d nodes, %s weights, %s: bound %.3f, ring %.3f, balanced %.3f (exact %.3f in %d passes, observed in %d passes, %d moves), %.0f moves/hour, hot tenant back within %.3f: %s",
		r.Nodes, r.weights(), r.Workload, r.Bound, r.Ring, r.Observed.Imbalance, r.Exact.Imbalance, r.Exact.Passes,
		r.Observed.Passes, r.Observed.Moves, r.SteadyMoves, r.Hot.Goal, r.Hot.recovered())
}

func (h HotTenant) recovered() string {
	if !h.Within {
		return "not within the window"
	}
	return h.Recovered.String()
}

// Misses lists the goals the row misses, with the budget of a
// pass among p partitions.
func (r Row) Misses(cfg Config) []string {
	var out []string
	budget := balance.Budget(cfg.Partitions, cfg.Balance.Budget)
	for _, c := range []struct {
		name string
		c    Converged
	}{{"exact", r.Exact}, {"observed", r.Observed}} {
		if c.c.Imbalance > r.Goal {
			out = append(out, fmt.Sprintf("%s: imbalance %.3f above the goal %.3f", c.name, c.c.Imbalance, r.Goal))
		}
		if c.c.Within < 0 || c.c.Within > 10 {
			out = append(out, fmt.Sprintf("%s: within the goal after %d passes", c.name, c.c.Within))
		}
		if c.c.MaxPerPass > budget {
			out = append(out, fmt.Sprintf("%s: %d moves in one pass, budget %d", c.name, c.c.MaxPerPass, budget))
		}
	}
	if r.SteadyMoves > 0 {
		out = append(out, fmt.Sprintf("%.0f moves per hour at steady state", r.SteadyMoves))
	}
	if r.Weighted && (r.WeightRatio < 1.8 || r.WeightRatio > 2.2) {
		out = append(out, fmt.Sprintf("a weight-2 node carries %.2fx a weight-1 node's load", r.WeightRatio))
	}
	if !r.Hot.Within {
		out = append(out, "the hot tenant's fleet not back within the goal")
	}
	return out
}

// WriteMarkdown writes the rows as markdown tables, with the command
// that reproduces them.
func WriteMarkdown(w io.Writer, cfg Config, rows []Row, command string) error {
	var b strings.Builder
	bc := cfg.Balance
	fmt.Fprintf(&b, "Placement by load on virtual time: %d partitions; keys: %d keys at Zipf rates k^-%g; tenants: %d tenants of log-uniform sizes over 1..%g; ",
		cfg.Partitions, cfg.Keys, cfg.ZipfS, cfg.Tenants, cfg.TenantMax)
	fmt.Fprintf(&b, "unequal fleets give every %s node weight 2. The balancer (balance.Plan) runs every %v with bands %g/%g, a noise margin of %g, %g of the partitions per pass (%d), a %v cooldown; ",
		ordinal(cfg.HeavyEvery), bc.Interval, bc.Upper, bc.Lower, bc.NoiseMargin, bc.Budget, balance.Budget(cfg.Partitions, bc.Budget), bc.Cooldown)
	fmt.Fprintf(&b, "it sees the owners' load meters (ownership's: a %v tick, a %v EWMA over the time served, rates to 3 digits) with ±%g%% noise per partition and tick, except in the \"exact\" columns (true rates). ",
		cfg.LoadInterval, cfg.LoadWindow, cfg.Noise*100)
	fmt.Fprintf(&b, "Imbalance is the highest load per unit of weight over the mean, from the true rates; bound is the heaviest partition on the heaviest-weighted node over the mean (no placement does better); goal is 1.10, or 5%% above the bound where the bound is above 1.05. ")
	fmt.Fprintf(&b, "Passes to the goal: the first pass after which the imbalance is within the goal; to the last move: up to the last pass that moved anything within %v (a late pass may still correct what the meters showed late); moves per hour are counted over %v of stationary load after that.\n\n", cfg.Converge, cfg.Steady)
	fmt.Fprintf(&b, "    %s\n\n", strings.TrimSpace(command))
	b.WriteString("| nodes | weights | load | bound | goal | ring alone | balanced, exact: imbalance / passes to the goal / to the last move / moves | balanced, observed: imbalance / passes to the goal / to the last move (that moved) / moves / most per pass | moves per hour at steady state (highest imbalance) | weight-2 / weight-1 load: ring / balanced |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---|---|---|---|\n")
	for _, r := range rows {
		ratio := "–"
		if r.Weighted {
			ratio = fmt.Sprintf("%.2f / %.2f", r.WeightRatioRing, r.WeightRatio)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %.3f | %.3f | %.3f | %.3f / %d / %d / %d | %.3f / %d / %d (%d) / %d / %d | %.0f (%.3f) | %s |\n",
			r.Nodes, r.weights(), r.Workload, r.Bound, r.Goal, r.Ring,
			r.Exact.Imbalance, r.Exact.Within, r.Exact.Passes, r.Exact.Moves,
			r.Observed.Imbalance, r.Observed.Within, r.Observed.Passes, r.Observed.Moving, r.Observed.Moves, r.Observed.MaxPerPass,
			r.SteadyMoves, r.SteadyMax, ratio)
	}
	fmt.Fprintf(&b, "\nA hot tenant (a key, in the keys load) drawn by the seed jumps to %g times the mean load per unit of weight, after the hour of steady state; the balancer sees it rise through the meters' EWMA. Back within the goal: virtual time until a pass finds the imbalance within the goal under the new bound (watched for %v).\n\n",
		cfg.Hot, cfg.HotWindow)
	b.WriteString("| nodes | weights | load | bound | goal | ring alone | right after the jump | back within the goal after | passes / moves | imbalance at the end |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---|---|---:|\n")
	for _, r := range rows {
		h := r.Hot
		fmt.Fprintf(&b, "| %d | %s | %s | %.3f | %.3f | %.3f | %.3f | %s | %d / %d | %.3f |\n",
			r.Nodes, r.weights(), r.Workload, h.Bound, h.Goal, h.Ring, h.Peak, h.recovered(), h.Passes, h.Moves, h.Imbalance)
	}
	var misses []string
	for _, r := range rows {
		for _, m := range r.Misses(cfg) {
			misses = append(misses, fmt.Sprintf("%d nodes, %s weights, %s: %s", r.Nodes, r.weights(), r.Workload, m))
		}
	}
	if len(misses) == 0 {
		b.WriteString("\nEvery goal met: imbalance within the goal, within it after at most 10 passes, within the budget per pass, 0 moves per hour at steady state, weight-2 nodes at 2x within 10%, the hot tenant's fleet back within the goal.\n")
	} else {
		b.WriteString("\nGoals missed:\n\n")
		for _, m := range misses {
			fmt.Fprintf(&b, "- %s\n", m)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ordinal(n int) string {
	switch n {
	case 1:
		return ""
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}
