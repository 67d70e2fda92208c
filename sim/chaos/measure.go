//go:build unix

package chaos

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

// newReport measures a finished run: the tallies of the fleet and the
// load, failovers and handoffs from the tenures, session losses by cause.
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
