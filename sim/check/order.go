package check

import "time"

// applied is a write the store definitely applied, with what the history
// says about when: the store log position and time if the store logged it,
// else the writer's [Invoke, Return] interval.
type applied struct {
	w      *Write
	logIdx int // index in History.Store, -1 if the store did not log it
	lo, hi time.Duration
}

// fact is something that raises a scope's floor: a floor raise or an
// applied write. Fact a is before fact b at the store if both are in the
// store log and a comes first, or else if a's latest possible time (hi) is
// before b's earliest (lo).
type fact struct {
	epoch  int64
	logIdx int
	lo, hi time.Duration
	event  *StoreEvent // floor raise, or nil
	write  *Write      // applied write, or nil
}

// index holds the per-write facts every checker needs.
type index struct {
	h       *History
	writes  map[WriteID]*Write
	applied []applied // in History.Writes order
}

// newIndex finds every applied write of h: one the store logged, or one
// its writer saw accepted. h must be valid.
func newIndex(h *History) *index {
	x := &index{h: h, writes: make(map[WriteID]*Write, len(h.Writes))}
	for i := range h.Writes {
		x.writes[h.Writes[i].ID] = &h.Writes[i]
	}
	logged := make(map[WriteID]int)
	for i, e := range h.Store {
		if e.Kind == WriteApplied {
			if _, dup := logged[e.Write]; !dup {
				logged[e.Write] = i
			}
		}
	}
	for i := range h.Writes {
		w := &h.Writes[i]
		if j, ok := logged[w.ID]; ok {
			at := h.Store[j].At
			x.applied = append(x.applied, applied{w: w, logIdx: j, lo: at, hi: at})
			continue
		}
		if w.Outcome == Accepted {
			x.applied = append(x.applied, applied{w: w, logIdx: -1, lo: w.Invoke, hi: w.Return})
		}
	}
	return x
}

func (a applied) fact() fact {
	return fact{epoch: a.w.Epoch, logIdx: a.logIdx, lo: a.lo, hi: a.hi, write: a.w}
}
