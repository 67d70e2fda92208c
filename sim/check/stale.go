package check

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// StaleWrite is a write the store applied under an epoch below the scope's
// floor at the time: the floor had been raised to a newer epoch, or a write
// under a newer epoch had been applied, definitely before it.
type StaleWrite struct {
	// Write is the stale write.
	Write Write
	// Floor is the newest epoch of the scope definitely admitted before
	// Write was applied.
	Floor int64
	// By says what set the floor: a FloorRaised event (ByWrite nil) or an
	// applied write under epoch Floor (ByWrite not nil).
	ByEvent *StoreEvent
	ByWrite *Write
}

func (s StaleWrite) String() string {
	by := "a floor raise"
	if s.ByEvent != nil {
		by = fmt.Sprintf("the floor raised at %v", s.ByEvent.At)
	}
	if s.ByWrite != nil {
		by = s.ByWrite.String()
	}
	return fmt.Sprintf("stale write accepted: %v, below floor %d set by %s", s.Write, s.Floor, by)
}

// StaleResult is the result of StaleWrites.
type StaleResult struct {
	// Applied counts the writes the store definitely applied.
	Applied    int
	Violations []StaleWrite
}

// OK reports whether no stale write was applied.
func (r StaleResult) OK() bool { return len(r.Violations) == 0 }

// StaleWrites finds every write the store applied under an epoch below the
// floor of its scope at the time it was applied.
//
// A write counts as applied if the store logged it (WriteApplied) or its
// writer saw it Accepted. A scope's floor at a point of the store's
// history is the highest epoch of the FloorRaised events and applied
// writes of the scope before that point: admitting a token records its
// epoch, as the fencing rule says, so a store without any fence (a
// baseline) still has the floor its newest writer implies. "Before" uses
// the store log's order when both facts are in it, otherwise time: a fact
// is before a write only if its latest possible time (its log time, or its
// writer's Return) is earlier than the write's earliest possible time (its
// log time, or its writer's Invoke). A write whose order against a newer
// epoch is unknown is therefore not reported.
func StaleWrites(h *History) (StaleResult, error) {
	if err := h.Validate(); err != nil {
		return StaleResult{}, err
	}
	if h == nil {
		return StaleResult{}, nil
	}
	x := newIndex(h)
	res := StaleResult{Applied: len(x.applied)}
	byScope := make(map[string][]fact)
	for i := range h.Store {
		e := &h.Store[i]
		if e.Kind == FloorRaised {
			byScope[e.Scope] = append(byScope[e.Scope], fact{epoch: e.Epoch, logIdx: i, lo: e.At, hi: e.At, event: e})
		}
	}
	for _, a := range x.applied {
		byScope[a.w.Scope] = append(byScope[a.w.Scope], a.fact())
	}
	scopes := make([]string, 0, len(byScope))
	for s := range byScope {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	for _, s := range scopes {
		res.Violations = append(res.Violations, staleInScope(byScope[s])...)
	}
	return res, nil
}

// StaleWritesByKey is StaleWrites for a history whose epochs, in every
// scope, are drawn from one sequence (etcd revisions): besides the floor
// of its scope, a write must not be applied after a write to the same key
// under a higher epoch, whatever scope that write carried. A key whose
// partition is split or merged moves from one scope to another, and its
// next owner's epoch is above its last owner's: a write of the last owner
// applied after one of the next is stale even if no floor of its own
// scope was raised. A write that breaks both rules is reported once, with
// the higher floor.
func StaleWritesByKey(h *History) (StaleResult, error) {
	res, err := StaleWrites(h)
	if err != nil || h == nil {
		return res, err
	}
	x := newIndex(h)
	byKey := make(map[string][]fact)
	for _, a := range x.applied {
		byKey[a.w.Key] = append(byKey[a.w.Key], a.fact())
	}
	ks := make([]string, 0, len(byKey))
	for k := range byKey {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	seen := make(map[WriteID]int, len(res.Violations))
	for i, v := range res.Violations {
		seen[v.Write.ID] = i
	}
	for _, k := range ks {
		for _, v := range staleInScope(byKey[k]) {
			i, ok := seen[v.Write.ID]
			switch {
			case !ok:
				seen[v.Write.ID] = len(res.Violations)
				res.Violations = append(res.Violations, v)
			case v.Floor > res.Violations[i].Floor:
				res.Violations[i] = v
			}
		}
	}
	return res, nil
}

// staleInScope checks one scope's facts in O(n log n).
func staleInScope(facts []fact) []StaleWrite {
	// Facts in the store log, in log order, with the running maximum.
	var logged []fact
	for _, f := range facts {
		if f.logIdx >= 0 {
			logged = append(logged, f)
		}
	}
	slices.SortFunc(logged, func(a, b fact) int { return a.logIdx - b.logIdx })
	logMax := runningMax(logged)

	// All facts, and the unlogged ones, by latest possible time.
	all := timeline(facts, func(fact) bool { return true })
	unlogged := timeline(facts, func(f fact) bool { return f.logIdx < 0 })

	var out []StaleWrite
	for _, w := range facts {
		if w.write == nil {
			continue
		}
		var best *fact
		consider := func(f *fact) {
			if f != nil && f.epoch > w.epoch && (best == nil || f.epoch > best.epoch) {
				best = f
			}
		}
		if w.logIdx >= 0 {
			// Logged facts before w in the log; unlogged ones by time.
			n := sort.Search(len(logged), func(i int) bool { return logged[i].logIdx >= w.logIdx })
			if n > 0 {
				consider(logMax[n-1])
			}
			consider(unlogged.before(w.lo))
		} else {
			consider(all.before(w.lo))
		}
		if best == nil {
			continue
		}
		v := StaleWrite{Write: *w.write, Floor: best.epoch}
		if best.write != nil {
			bw := *best.write
			v.ByWrite = &bw
		}
		if best.event != nil {
			be := *best.event
			v.ByEvent = &be
		}
		out = append(out, v)
	}
	return out
}

// runningMax returns, for each i, the fact of highest epoch among fs[:i+1].
func runningMax(fs []fact) []*fact {
	out := make([]*fact, len(fs))
	var m *fact
	for i := range fs {
		if m == nil || fs[i].epoch > m.epoch {
			m = &fs[i]
		}
		out[i] = m
	}
	return out
}

// byHi is facts sorted by latest possible time, with running maxima.
type byHi struct {
	fs  []fact
	max []*fact
}

func timeline(facts []fact, keep func(fact) bool) byHi {
	var fs []fact
	for _, f := range facts {
		if keep(f) {
			fs = append(fs, f)
		}
	}
	slices.SortStableFunc(fs, func(a, b fact) int {
		switch {
		case a.hi < b.hi:
			return -1
		case a.hi > b.hi:
			return 1
		}
		return 0
	})
	return byHi{fs: fs, max: runningMax(fs)}
}

// before returns the fact of highest epoch whose latest time is before t.
func (b byHi) before(t time.Duration) *fact {
	n := sort.Search(len(b.fs), func(i int) bool { return b.fs[i].hi >= t })
	if n == 0 {
		return nil
	}
	return b.max[n-1]
}
