package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// SameEpochWriters is more than one writer admitted under one (scope,
// epoch): two processes each believed they held the one tenure.
type SameEpochWriters struct {
	Scope string
	Epoch int64
	// Writers are the distinct writers, sorted; Writes holds the first
	// applied write of each, in the same order.
	Writers []string
	Writes  []Write
}

func (v SameEpochWriters) String() string {
	return fmt.Sprintf("double execution: %s epoch %d written by %s", v.Scope, v.Epoch, strings.Join(v.Writers, ", "))
}

// OverlapWrite is two holders whose tenures of one scope overlapped and
// who both wrote: the older holder's write was applied after the newer
// holder's.
type OverlapWrite struct {
	Older, Newer Tenure
	// NewerWrite was applied definitely before OlderWrite.
	NewerWrite, OlderWrite Write
}

func (v OverlapWrite) String() string {
	return fmt.Sprintf("double execution: tenures %v and %v overlap and both wrote: %v, then %v",
		v.Older, v.Newer, v.NewerWrite, v.OlderWrite)
}

// DoubleResult is the result of DoubleExecutions.
type DoubleResult struct {
	SameEpoch   []SameEpochWriters
	Interleaved []OverlapWrite
}

// Count is the number of double executions found.
func (r DoubleResult) Count() int { return len(r.SameEpoch) + len(r.Interleaved) }

// OK reports whether no double execution was found.
func (r DoubleResult) OK() bool { return r.Count() == 0 }

// DoubleExecutions finds scopes that had two admitted writers at once:
//
//   - two or more distinct writers with applied writes under the same
//     (scope, epoch);
//   - two tenures of one scope by different holders that overlap in time,
//     where a write of the older holder (under its tenure's epoch) was
//     applied definitely after a write of the newer holder (under its
//     epoch): both executed, interleaved. A write the store applied before
//     the newer holder's first write is the older tenure ending late, not a
//     double execution, and is not reported.
//
// Applied writes and "definitely after" are as in StaleWrites.
func DoubleExecutions(h *History) (DoubleResult, error) {
	if err := h.Validate(); err != nil {
		return DoubleResult{}, err
	}
	var res DoubleResult
	if h == nil {
		return res, nil
	}
	x := newIndex(h)

	type se struct {
		scope string
		epoch int64
	}
	type hw struct {
		se
		writer string
	}
	first := make(map[se]map[string]Write)
	byHolder := make(map[hw]*span)
	for i := range x.applied {
		a := &x.applied[i]
		k := se{a.w.Scope, a.w.Epoch}
		m := first[k]
		if m == nil {
			m = make(map[string]Write)
			first[k] = m
		}
		if _, ok := m[a.w.Writer]; !ok {
			m[a.w.Writer] = *a.w
		}
		sp := byHolder[hw{k, a.w.Writer}]
		if sp == nil {
			sp = &span{}
			byHolder[hw{k, a.w.Writer}] = sp
		}
		sp.add(a)
	}
	for k, m := range first {
		if len(m) < 2 {
			continue
		}
		v := SameEpochWriters{Scope: k.scope, Epoch: k.epoch}
		for w := range m {
			v.Writers = append(v.Writers, w)
		}
		slices.Sort(v.Writers)
		for _, w := range v.Writers {
			v.Writes = append(v.Writes, m[w])
		}
		res.SameEpoch = append(res.SameEpoch, v)
	}
	slices.SortFunc(res.SameEpoch, func(a, b SameEpochWriters) int {
		return cmp.Or(strings.Compare(a.Scope, b.Scope), cmp.Compare(a.Epoch, b.Epoch))
	})

	for _, ts := range tenuresByScope(h) {
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if b.Start >= a.End {
					break // sorted by Start: no later tenure overlaps a
				}
				if a.Holder == b.Holder || a.Epoch == b.Epoch {
					continue
				}
				older, newer := a, b
				if older.Epoch > newer.Epoch {
					older, newer = newer, older
				}
				ow := byHolder[hw{se{older.Scope, older.Epoch}, older.Holder}]
				nw := byHolder[hw{se{newer.Scope, newer.Epoch}, newer.Holder}]
				if n, o, ok := interleaved(nw, ow); ok {
					res.Interleaved = append(res.Interleaved, OverlapWrite{
						Older: older, Newer: newer, NewerWrite: *n.w, OlderWrite: *o.w,
					})
				}
			}
		}
	}
	return res, nil
}

// span is what interleaved needs of one holder's applied writes under
// one epoch: its extremes in the store log and in time.
type span struct {
	firstLog, lastLog          *applied // logged writes, by log index
	earliest, earliestUnlogged *applied // by latest possible time
	latest, latestUnlogged     *applied // by earliest possible time
}

func (s *span) add(a *applied) {
	if a.logIdx >= 0 {
		if s.firstLog == nil || a.logIdx < s.firstLog.logIdx {
			s.firstLog = a
		}
		if s.lastLog == nil || a.logIdx > s.lastLog.logIdx {
			s.lastLog = a
		}
	}
	if s.earliest == nil || a.hi < s.earliest.hi {
		s.earliest = a
	}
	if s.latest == nil || a.lo > s.latest.lo {
		s.latest = a
	}
	if a.logIdx < 0 {
		if s.earliestUnlogged == nil || a.hi < s.earliestUnlogged.hi {
			s.earliestUnlogged = a
		}
		if s.latestUnlogged == nil || a.lo > s.latestUnlogged.lo {
			s.latestUnlogged = a
		}
	}
}

// interleaved finds a write of newer applied definitely before a write of
// older, in O(1).
func interleaved(newer, older *span) (n, o *applied, ok bool) {
	if newer == nil || older == nil {
		return nil, nil, false
	}
	if newer.firstLog != nil && older.lastLog != nil && newer.firstLog.logIdx < older.lastLog.logIdx {
		return newer.firstLog, older.lastLog, true
	}
	// By time, where at least one of the two is not in the store log.
	for _, p := range [][2]*applied{{newer.earliestUnlogged, older.latest}, {newer.earliest, older.latestUnlogged}} {
		if p[0] != nil && p[1] != nil && p[0].hi < p[1].lo {
			return p[0], p[1], true
		}
	}
	return nil, nil, false
}

// tenuresByScope groups h's tenures by scope, each sorted by Start then
// Epoch, the scopes in sorted order.
func tenuresByScope(h *History) [][]Tenure {
	m := make(map[string][]Tenure)
	for _, t := range h.Tenures {
		m[t.Scope] = append(m[t.Scope], t)
	}
	scopes := make([]string, 0, len(m))
	for s := range m {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	out := make([][]Tenure, 0, len(scopes))
	for _, s := range scopes {
		ts := m[s]
		slices.SortStableFunc(ts, func(a, b Tenure) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Epoch, b.Epoch))
		})
		out = append(out, ts)
	}
	return out
}
