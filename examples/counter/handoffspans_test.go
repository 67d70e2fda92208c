package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readSpans reads every span file (*.spans) in dir.
func readSpans(t *testing.T, dir string) []spanLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.spans"))
	if err != nil {
		t.Fatal(err)
	}
	var out []spanLine
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l spanLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, l)
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return out
}

// Span names and attributes the analysis reads (ownership's trace.go).
const (
	nameMoveOut  = "tenure.move.out"
	nameMoveIn   = "tenure.move.in"
	nameDrain    = "tenure.move.drain"
	nameRelease  = "tenure.move.release"
	nameHandover = "tenure.move.handover"
	nameClaim    = "tenure.claim"
	nameFence    = "tenure.fence"
	nameStart    = "tenure.start"
)

// joinMoves joins every completed tenure.move.out to the tenure.move.in
// of its trace that admitted, and returns the moves, and the completed
// moves out that found none.
func joinMoves(spans []spanLine) ([]handoffMove, []unjoinedMove) {
	kids := map[string][]spanLine{} // trace/parent -> children
	ins := map[string][]spanLine{}  // trace -> tenure.move.in roots
	for _, s := range spans {
		kids[s.Trace+"/"+s.Parent] = append(kids[s.Trace+"/"+s.Parent], s)
		if s.Name == nameMoveIn {
			ins[s.Trace] = append(ins[s.Trace], s)
		}
	}
	child := func(root spanLine, name string) (spanLine, bool) {
		for _, k := range kids[root.Trace+"/"+root.Span] {
			if k.Name == name {
				return k, true
			}
		}
		return spanLine{}, false
	}
	var out []handoffMove
	var unjoined []unjoinedMove
	for _, o := range spans {
		if o.Name != nameMoveOut || o.Error != "" {
			continue
		}
		drain, ok1 := child(o, nameDrain)
		ho, ok2 := child(o, nameHandover)
		if !ok1 || !ok2 {
			continue // called off, or ended otherwise
		}
		var in spanLine
		var admit time.Time
		for _, c := range ins[o.Trace] {
			for _, ev := range c.Events {
				if ev.Name == "admit" {
					in, admit = c, ev.Time
				}
			}
		}
		if admit.IsZero() {
			u := unjoinedMove{at: o.Start, what: fmt.Sprintf("partition %d: %s's move out at %s, its claim at revision %v (handed to %q) at %s; moves in of its trace:",
				num(o.Attrs["tenure.partition"]), str(o.Attrs["tenure.node"]), o.Start.Format("15:04:05.000"), ho.Attrs["tenure.revision"], str(ho.Attrs["tenure.successor"]), ho.End.Format("15:04:05.000"))}
			for _, c := range ins[o.Trace] {
				u.what += fmt.Sprintf(" %s %s-%s error %q children", str(c.Attrs["tenure.node"]), c.Start.Format("15:04:05.000"), c.End.Format("15:04:05.000"), c.Error)
				for _, k := range kids[c.Trace+"/"+c.Span] {
					u.what += fmt.Sprintf(" %s(%s %q)", k.Name, k.End.Sub(k.Start).Round(time.Microsecond), k.Error)
				}
			}
			unjoined = append(unjoined, u)
			continue
		}
		m := handoffMove{
			partition: num(o.Attrs["tenure.partition"]), holder: str(o.Attrs["tenure.node"]), successor: str(in.Attrs["tenure.node"]),
			outStart: o.Start, handoff: admit.Sub(drain.End), gap: admit.Sub(drain.Start),
			write: ho.End.Sub(ho.Start), writeFrom: ho.Start, writeTo: ho.End, holderRev: num(ho.Attrs["tenure.revision"]), epoch: num(in.Attrs["tenure.epoch"]),
			handedOver: str(ho.Attrs["tenure.successor"]) != "",
		}
		if rel, ok := child(o, nameRelease); ok {
			m.release = rel.End.Sub(rel.Start)
		}
		next := time.Time{}
		if c, ok := child(in, nameClaim); ok {
			m.claim = c.End.Sub(c.Start)
			next = c.Start
		}
		if f, ok := child(in, nameFence); ok {
			m.fence = f.End.Sub(f.Start)
			if next.IsZero() {
				next = f.Start
			}
		}
		if s, ok := child(in, nameStart); ok {
			m.start = admit.Sub(s.Start)
		}
		if !next.IsZero() {
			m.seen = next.Sub(ho.End)
		}
		m.writes = 1
		if m.epoch != m.holderRev {
			m.writes = 2
		}
		out = append(out, m)
	}
	return out, unjoined
}

func num(v any) int64 {
	f, _ := v.(float64) // JSON numbers
	return int64(f)
}

func str(v any) string { s, _ := v.(string); return s }

// summary returns the figures of r as lines of a table, for key.
func (r *handoffResult) summary(key string) string {
	ms := r.moves
	q := func(get func(handoffMove) time.Duration) string {
		ds := make([]time.Duration, len(ms))
		for i, m := range ms {
			ds[i] = get(m)
		}
		return quantiles(ds)
	}
	writes := map[int]int{}
	handed := 0
	for _, m := range ms {
		writes[m.writes]++
		if m.handedOver {
			handed++
		}
	}
	var leaves []string
	for _, l := range r.leaves {
		leaves = append(leaves, fmt.Sprintf("%d:%d+%d", l.moved, l.holderRevs, l.claimRevs))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-16s moves %3d (handed over %d; writes on the critical path: 1 x%d, 2 x%d; %d moves out without a move in)  load %s\n", key, len(ms), handed, writes[1], writes[2], r.unjoined, strings.Join(r.loads, ", "))
	fmt.Fprintf(&sb, "  p50/p90/max  handoff %s  gap %s\n", q(func(m handoffMove) time.Duration { return m.handoff }), q(func(m handoffMove) time.Duration { return m.gap }))
	fmt.Fprintf(&sb, "  phases       release %s  write %s  seen %s  claim %s  fence %s  start %s\n",
		q(func(m handoffMove) time.Duration { return m.release }), q(func(m handoffMove) time.Duration { return m.write }),
		q(func(m handoffMove) time.Duration { return m.seen }), q(func(m handoffMove) time.Duration { return m.claim }),
		q(func(m handoffMove) time.Duration { return m.fence }), q(func(m handoffMove) time.Duration { return m.start }))
	fmt.Fprintf(&sb, "  between      %s (the handoff less the phases above: the event loops' turns between them)\n", q(handoffMove.between))
	var all, during []time.Duration
	for _, pt := range r.probe {
		all = append(all, pt.took)
		if slices.ContainsFunc(ms, func(m handoffMove) bool { return pt.at.Before(m.writeTo) && m.writeFrom.Before(pt.at.Add(pt.took)) }) {
			during = append(during, pt.took)
		}
	}
	fmt.Fprintf(&sb, "  etcd probe   %s, %s during the holders' writes (%d and %d transactions of one compare and one put from the test process: etcd's own commit latency)\n", quantiles(all), quantiles(during), len(all), len(during))
	worst := slices.Clone(ms)
	slices.SortFunc(worst, func(a, b handoffMove) int { return cmp.Compare(b.handoff, a.handoff) })
	for _, m := range worst[:min(3, len(worst))] {
		fmt.Fprintf(&sb, "  slowest      p%d %s->%s handoff %.2f: release %.2f write %.2f seen %.2f claim %.2f fence %.2f start %.2f between %.2f\n",
			m.partition, m.holder, m.successor, ms1(m.handoff), ms1(m.release), ms1(m.write), ms1(m.seen), ms1(m.claim), ms1(m.fence), ms1(m.start), ms1(m.between()))
	}
	kinds := slices.Sorted(maps.Keys(r.revisions))
	total := 0
	for i, k := range kinds {
		total += r.revisions[k]
		kinds[i] = fmt.Sprintf("%s %d", k, r.revisions[k])
	}
	fmt.Fprintf(&sb, "  etcd writes  %d revisions changed the fleet's keys during the restarts: %s\n", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&sb, "  leaves (partitions moved: holder write revisions + successor claim revisions)  %s\n", strings.Join(leaves, "  "))
	return sb.String()
}

// quantiles returns the p50, p90 and max of ds in milliseconds, "-" if
// there are none. ds is sorted.
func quantiles(ds []time.Duration) string {
	slices.Sort(ds)
	if len(ds) == 0 {
		return "-"
	}
	at := func(f float64) float64 { return ms1(ds[min(len(ds)-1, int(f*float64(len(ds))))]) }
	return fmt.Sprintf("%.2f/%.2f/%.2f", at(0.5), at(0.9), ms1(ds[len(ds)-1]))
}

// between is the handoff of m less its phases.
func (m handoffMove) between() time.Duration {
	return m.handoff - m.release - m.write - m.seen - m.claim - m.fence - m.start
}

// ms1 returns d in milliseconds.
func ms1(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
