package scale

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tenure-go/tenure/ownership/balance"
)

// WriteMarkdown writes the report as markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	if l := r.Live; l != nil {
		fmt.Fprintf(&b, "## Live fleet: %d nodes x %d partitions (load factor %v, TTL %v, virtual step %v)\n\n",
			l.Nodes, l.Partitions, c.LoadFactor, c.TTL, c.Step)
		b.WriteString("Etcd figures are the nodes' traffic (writes = raft proposals: puts, deletes, write txns, lease grants and revokes). " +
			"Virtual time is what the fleet waited on timers (leases, backoffs); wall time is this machine's processing. " +
			"Moved = partitions whose ring owner differs between consecutive rings; ideal = P/N of the node that came or went.\n\n")
		b.WriteString("| phase | changes | writes | revisions | reads | keep-alives | watch responses | watch events | virtual to stable | wall | moved | acquired | ideal | moved/ideal |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		phases := append([]Phase{l.BringUp}, l.Phases...)
		for _, p := range phases {
			writePhase(&b, p.Name, p, 1)
			if p.Changes > 1 && p.Name != "bring-up" {
				writePhase(&b, p.Name+", per change", p, p.Changes)
			}
		}
		for _, p := range phases {
			if p.Name == "load reports" && p.Virtual > 0 {
				fmt.Fprintf(&b, "\nLoad reports of the live fleet: %d writes in %v of virtual time, **%.2f writes/s** (a report a node at most every max(10s, members/5 s)).\n",
					p.Etcd.Writes, p.Virtual, float64(p.Etcd.Writes)/p.Virtual.Seconds())
			}
		}
		fmt.Fprintf(&b, "\nHeap in use after GC: %s before the first node (memetcd, parked claims), %s with the fleet up: **%s per node**; %.1f goroutines per node.\n",
			byteSize(l.HeapBefore), byteSize(l.HeapFleet), byteSize(l.HeapPerNode), l.GoroutinesPerNode)
		for _, p := range phases {
			if p.Changes > 1 && p.Name != "bring-up" {
				fmt.Fprintf(&b, "Slowest change of %s: %v virtual, %v wall.\n", p.Name, p.MaxVirtual, p.MaxWall.Round(time.Millisecond))
			}
		}
		b.WriteString("\n")
	}
	if g := r.Ring; g != nil {
		weights := "every weight 1"
		if g.Heavy > 0 {
			weights = fmt.Sprintf("every %d-th node and joiner of weight 2", g.Heavy)
		}
		fmt.Fprintf(&b, "## Ring only: %d nodes x %d partitions (load factor %v, %s)\n\n", g.Nodes, g.Partitions, c.LoadFactor, weights)
		b.WriteString("Both ring algorithms on the same samples. Ideal = P x the weight of the node that came or went / the total weight " +
			"(the bounded algorithm gives every node weight 1). Build = one ring; every node builds one per membership change.\n\n")
		b.WriteString("| algorithm | change | samples | ideal | mean moved | mean/ideal | max moved | max/ideal | build | heap |\n")
		b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, f := range g.Rules {
			name := f.Algorithm.String()
			for _, m := range []struct {
				name string
				m    Moves
			}{{fmt.Sprintf("join (%d -> %d)", g.Nodes, g.Nodes+1), f.Join}, {fmt.Sprintf("leave (%d -> %d)", g.Nodes, g.Nodes-1), f.Leave}} {
				if m.m.Samples == 0 {
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %.2f | %d | %.2f | %v | %s |\n", name, m.name, m.m.Samples, m.m.Ideal,
					m.m.Mean, m.m.MeanRatio(), m.m.Max, m.m.MaxRatio, f.Build.Round(time.Microsecond), byteSize(f.RingBytes))
			}
		}
		b.WriteString("\n")
	}
	if pr := r.Placement; pr != nil {
		writePlacement(&b, pr)
	}
	fmt.Fprintf(&b, "Wall time of the run: %v.\n", r.Wall.Round(time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}

// writePhase writes one row of p's figures divided by div.
func writePhase(b *strings.Builder, name string, p Phase, div int) {
	d := int64(div)
	e := p.Etcd
	ratio := "-"
	if p.Ideal > 0 && p.Name != "bring-up" {
		ratio = fmt.Sprintf("%.2f", p.MoveRatio())
	}
	changes := fmt.Sprint(p.Changes)
	if div > 1 {
		changes = "1"
	}
	fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %d | %d | %v | %v | %d | %d | %.1f | %s |\n",
		name, changes, e.Writes/d, e.Revisions/d, e.Reads/d, e.KeepAlives/d, e.WatchResponses/d, e.WatchEvents/d,
		(p.Virtual / time.Duration(div)).Round(time.Millisecond), (p.Wall / time.Duration(div)).Round(time.Millisecond),
		int64(p.Moved)/d, p.Acquired/d, p.Ideal/float64(div), ratio)
}

// bytes formats n bytes in KiB or MiB.
func byteSize(n uint64) string {
	if n >= 10<<20 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

// writePlacement writes the placement figures.
func writePlacement(b *strings.Builder, pr *PlacementReport) {
	weights := "every weight 1"
	if pr.Heavy > 0 {
		weights = fmt.Sprintf("every %d-th node of weight 2", pr.Heavy)
	}
	load := map[string]string{
		LoadZipf:    fmt.Sprintf("%d keys, Zipf s = 0.9", pr.Keys),
		LoadTenants: "5,000 tenants, log-uniform 1 to 1,000",
		LoadUniform: "partition loads uniform over 0.5 to 1.5",
	}[pr.Model]
	fmt.Fprintf(b, "## Placement: %d nodes x %d partitions (ring algorithm 2, %s; %s)\n\n", pr.Nodes, pr.Partitions, weights, load)
	fmt.Fprintf(b, "Load reports, counted on a virtual hour by the load meter's rule (ownership's defaults: a report at most every "+
		"max(%v, members/%v per second), only when it changed; noisy load changes every report):\n\n", meterInterval, meterBudget)
	b.WriteString("| nodes joined | report writes/s | most in one second |\n|---|--:|--:|\n")
	fmt.Fprintf(b, "| at once | %.2f | %d |\n| spread over the interval | %.2f | %d |\n\n", pr.Aligned, pr.AlignedPeak, pr.Spread, pr.SpreadPeak)
	bc := balance.DefaultConfig()
	fmt.Fprintf(b, "Balance (balance.DefaultConfig: bands %v/%v, %v%% of the partitions a pass, cooldown %v, a pass every %v):\n\n",
		bc.Upper, bc.Lower, bc.Budget*100, bc.Cooldown, bc.Interval)
	b.WriteString("| figure | value |\n|---|--:|\n")
	fmt.Fprintf(b, "| lower bound (heaviest partition / mean load per weight / largest weight) | %.2f |\n", pr.LowerBound)
	fmt.Fprintf(b, "| imbalance of the ring alone | %.2f |\n", pr.Before)
	fmt.Fprintf(b, "| balance.Plan, one pass | %v (%d moves) |\n", pr.Plan.Round(time.Microsecond), pr.FirstMoves)
	fmt.Fprintf(b, "| Balancer.Plan with its reads (in-memory etcd) | %v |\n", pr.BalancerPlan.Round(time.Microsecond))
	fmt.Fprintf(b, "| Balancer.Apply | %v (%d etcd write for %d moves) |\n", pr.BalancerApply.Round(time.Microsecond), pr.ApplyWrites, pr.ApplyMoves)
	fmt.Fprintf(b, "| passes with moves until a pass moves nothing | %d |\n", pr.Passes)
	fmt.Fprintf(b, "| moves in all / most in one pass | %d / %d |\n", pr.Moves, pr.MaxMoves)
	fmt.Fprintf(b, "| imbalance after | %.2f |\n", pr.After)
	if pr.Passes > 0 {
		// Each pass with moves is one balancer transaction; each move a
		// handoff of about 2 writes (the old owner's claim deleted, the
		// new owner's created; the live join above: 26 writes for 12).
		fmt.Fprintf(b, "| etcd writes for moves while converging, per second (1 a pass + 2 a move, a pass every %v) | %.2f |\n",
			balance.DefaultConfig().Interval, float64(pr.Passes+2*pr.Moves)/(float64(pr.Passes)*balance.DefaultConfig().Interval.Seconds()))
	}
	fmt.Fprintf(b, "| moves of a partition the same pass already moved (all passes / the Balancer's pass) | %d / %d |\n\n", pr.PlanDuplicates, pr.Duplicates)
}
