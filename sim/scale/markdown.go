package scale

import (
	"fmt"
	"io"
	"strings"
	"time"
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
		alg := max(c.RingAlgorithm, 1)
		fmt.Fprintf(&b, "## Ring only: %d nodes x %d partitions (load factor %v, ring algorithm %d)\n\n", g.Nodes, g.Partitions, c.LoadFactor, alg)
		b.WriteString("| change | samples | ideal P/N | mean moved | mean/ideal | max moved | max/ideal |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
		for _, m := range []struct {
			name string
			m    Moves
		}{{fmt.Sprintf("join (%d -> %d)", g.Nodes, g.Nodes+1), g.Join}, {fmt.Sprintf("leave (%d -> %d)", g.Nodes, g.Nodes-1), g.Leave}} {
			if m.m.Samples == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.2f | %d | %.2f |\n", m.name, m.m.Samples, m.m.Ideal, m.m.Mean, m.m.MeanRatio(), m.m.Max, m.m.MaxRatio())
		}
		fmt.Fprintf(&b, "\nOne ring: built in %v, holds %s. Every node rebuilds its ring on every membership change: %v of CPU per change fleet-wide.\n\n",
			g.Build.Round(time.Microsecond), byteSize(g.RingBytes), g.FleetBuild.Round(time.Millisecond))
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
