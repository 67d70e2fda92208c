package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LostKind says how an acknowledged update was lost.
type LostKind uint8

const (
	// Forked: two or more acknowledged read-modify-writes read the same
	// value; all but one were lost (the classic lost update).
	Forked LostKind = iota + 1
	// Overwritten: an acknowledged read-modify-write is on no chain from
	// the initial value to the final one: a later write replaced it
	// without reading it.
	Overwritten
	// FinalMismatch: the chain of acknowledged read-modify-writes (or,
	// for blind writes, every write that may have been last) does not end
	// at the store's final value.
	FinalMismatch
	// CounterShort: a counter's final value is below the sum of its
	// acknowledged increments (distinct idempotency keys).
	CounterShort
	// CounterOver: a counter's final value is above what its acknowledged
	// and unknown increments can explain: an increment applied twice.
	CounterOver
)

// String names the kind.
func (k LostKind) String() string {
	switch k {
	case Forked:
		return "forked"
	case Overwritten:
		return "overwritten"
	case FinalMismatch:
		return "final mismatch"
	case CounterShort:
		return "counter short"
	case CounterOver:
		return "counter over"
	}
	return fmt.Sprintf("lost(%d)", uint8(k))
}

// LostUpdate is one violation found by LostUpdates.
type LostUpdate struct {
	Kind LostKind
	Key  string
	// Writes are the writes involved: the forked writes (all read Read),
	// or the overwritten one.
	Writes []Write
	// Read is the value the forked writes all read.
	Read string
	// Want and Final: the value the history implies and the store's final
	// value (FinalMismatch, counters).
	Want, Final string
	// Acked is the sum of a counter's acknowledged increments, each
	// idempotency key once; Unknown the sum of the increments whose
	// outcome is unknown and whose key was never acknowledged.
	Acked, Unknown int64
	// Lost counts the acknowledged updates this violation lost (for a
	// counter: increments; for Forked: the forked writes but one), or, for
	// CounterOver, the increments applied more than once.
	Lost int64
}

func (v LostUpdate) String() string {
	switch v.Kind {
	case Forked:
		ws := make([]string, len(v.Writes))
		for i, w := range v.Writes {
			ws[i] = w.String()
		}
		return fmt.Sprintf("lost update on %q: %d acknowledged writes read %q: %s", v.Key, len(v.Writes), v.Read, strings.Join(ws, "; "))
	case Overwritten:
		return fmt.Sprintf("lost update on %q: %v was overwritten without being read", v.Key, v.Writes[0])
	case FinalMismatch:
		return fmt.Sprintf("lost update on %q: final value %q, want %q", v.Key, v.Final, v.Want)
	case CounterShort, CounterOver:
		return fmt.Sprintf("counter %q %s: final %s, acknowledged increments %d, unknown %d", v.Key, v.Kind, v.Final, v.Acked, v.Unknown)
	}
	return v.Kind.String()
}

// LostResult is the result of LostUpdates.
type LostResult struct {
	// Acknowledged counts the acknowledged writes and increments checked.
	Acknowledged int
	Violations   []LostUpdate
}

// Lost sums the updates lost (or applied twice) over all violations.
func (r LostResult) Lost() int64 {
	var n int64
	for _, v := range r.Violations {
		n += v.Lost
	}
	return n
}

// OK reports whether every acknowledged update survived, once.
func (r LostResult) OK() bool { return len(r.Violations) == 0 }

// LostUpdates checks that every acknowledged update is in the final state.
//
// For writes, per key: when a key's writes are read-modify-writes
// (HasRead), the applied ones must form one chain from the key's initial
// value to its final value, each reading what the previous wrote: two
// acknowledged writes that read the same value are Forked (one overwrote
// the other, the classic lost update), an acknowledged write left off the
// chain is Overwritten, and a chain that does not end at the final value
// is a FinalMismatch. Writes of unknown outcome may be on the chain or not.
// The chain check needs values unique per key (a counter's successive
// values, or values that carry their write's ID), and a key's writes all
// read-modify-writes: a blind write on such a key is left out of the chain. When a key has only
// blind writes, its final value must be the value of an applied (or
// unknown) write that no other applied write definitely followed.
//
// For counters (Incr operations), per key: the final value must equal the
// initial value plus the acknowledged increments, each idempotency key
// once, give or take increments of unknown outcome: below is CounterShort
// (lost), above is CounterOver (applied twice).
//
// Final values are checked only when the history has a Final map; a key
// missing from it has the empty value (counters: 0).
func LostUpdates(h *History) (LostResult, error) {
	if err := h.Validate(); err != nil {
		return LostResult{}, err
	}
	var res LostResult
	if h == nil {
		return res, nil
	}
	x := newIndex(h)
	appliedByID := make(map[WriteID]*applied, len(x.applied))
	for i := range x.applied {
		appliedByID[x.applied[i].w.ID] = &x.applied[i]
	}
	keys := make(map[string][]cand)
	for i := range h.Writes {
		w := &h.Writes[i]
		c := cand{w: w}
		if a := appliedByID[w.ID]; a != nil {
			c.applied, c.logIdx, c.lo, c.hi = true, a.logIdx, a.lo, a.hi
		} else if w.Outcome == Rejected {
			continue
		} else {
			c.logIdx, c.lo, c.hi = -1, w.Invoke, Never
		}
		keys[w.Key] = append(keys[w.Key], c)
	}
	for _, k := range sortedKeys(keys) {
		cs := keys[k]
		rmw := slices.ContainsFunc(cs, func(c cand) bool { return c.w.HasRead })
		for _, c := range cs {
			if c.acked() {
				res.Acknowledged++
			}
		}
		if rmw {
			res.Violations = append(res.Violations, chain(h, k, cs)...)
		} else {
			res.Violations = append(res.Violations, blind(h, k, cs)...)
		}
	}
	cv, n, err := counters(h)
	if err != nil {
		return LostResult{}, err
	}
	res.Acknowledged += n
	res.Violations = append(res.Violations, cv...)
	return res, nil
}

// cand is a write that may be in the final state.
type cand struct {
	w       *Write
	applied bool // definitely applied
	logIdx  int
	lo, hi  time.Duration
}

// acked reports whether the writer was told the write took effect.
func (c cand) acked() bool { return c.w.Outcome == Accepted }

// after reports whether c is known to have been applied after d.
func (c cand) after(d cand) bool {
	if c.logIdx >= 0 && d.logIdx >= 0 {
		return c.logIdx > d.logIdx
	}
	return d.hi < c.lo
}

func chain(h *History, key string, cs []cand) []LostUpdate {
	var out []LostUpdate
	byRead := make(map[string][]int)
	for i, c := range cs {
		if c.w.HasRead {
			byRead[c.w.Read] = append(byRead[c.w.Read], i)
		}
	}
	final, haveFinal := h.Final[key], h.Final != nil
	used := make([]bool, len(cs))
	cur := h.Initial[key]
	for {
		var acked, maybe []int
		for _, i := range byRead[cur] {
			if used[i] {
				continue
			}
			if cs[i].acked() || cs[i].applied {
				acked = append(acked, i)
			} else {
				maybe = append(maybe, i)
			}
		}
		next := -1
		switch {
		case len(acked) > 0:
			// Follow the one applied last: it overwrote the others.
			next = acked[0]
			for _, i := range acked[1:] {
				if cs[i].after(cs[next]) {
					next = i
				}
			}
			var ackedOnly []Write
			for _, i := range acked {
				used[i] = true
				if cs[i].acked() {
					ackedOnly = append(ackedOnly, *cs[i].w)
				}
			}
			if len(ackedOnly) > 1 {
				out = append(out, LostUpdate{Kind: Forked, Key: key, Writes: ackedOnly, Read: cur, Lost: int64(len(ackedOnly) - 1)})
			}
		case len(maybe) > 0 && (!haveFinal || cur != final):
			next = maybe[0]
			used[next] = true
		}
		if next < 0 {
			break
		}
		cur = cs[next].w.Value
	}
	for i, c := range cs {
		if !used[i] && c.acked() && c.w.HasRead {
			out = append(out, LostUpdate{Kind: Overwritten, Key: key, Writes: []Write{*c.w}, Lost: 1})
		}
	}
	if haveFinal && cur != final {
		out = append(out, LostUpdate{Kind: FinalMismatch, Key: key, Want: cur, Final: final, Lost: 1})
	}
	return out
}

func blind(h *History, key string, cs []cand) []LostUpdate {
	if h.Final == nil {
		return nil
	}
	final := h.Final[key]
	// The writes that may have been applied last: those no applied write
	// definitely followed, found in O(n) from the latest applied writes.
	maxLog, maxLoUnlogged, maxLo := -1, time.Duration(-1<<63), time.Duration(-1<<63)
	for _, d := range cs {
		if !d.applied {
			continue
		}
		maxLo = max(maxLo, d.lo)
		if d.logIdx >= 0 {
			maxLog = max(maxLog, d.logIdx)
		} else {
			maxLoUnlogged = max(maxLoUnlogged, d.lo)
		}
	}
	var last []cand
	for _, c := range cs {
		overwritten := maxLo > c.hi
		if c.logIdx >= 0 {
			overwritten = maxLog > c.logIdx || maxLoUnlogged > c.hi
		}
		if !overwritten {
			last = append(last, c)
		}
	}
	if slices.ContainsFunc(last, func(c cand) bool { return c.w.Value == final }) {
		return nil
	}
	if !slices.ContainsFunc(last, func(c cand) bool { return c.applied }) && final == h.Initial[key] {
		return nil // nothing definitely applied: the initial value may stand
	}
	want := make([]string, 0, len(last))
	var ws []Write
	for _, c := range last {
		want = append(want, strconv.Quote(c.w.Value))
		ws = append(ws, *c.w)
	}
	return []LostUpdate{{Kind: FinalMismatch, Key: key, Writes: ws, Want: "one of " + strings.Join(want, ", "), Final: final, Lost: 1}}
}

// counters checks every counter key of h's operations and returns the
// violations and the number of acknowledged increments.
func counters(h *History) ([]LostUpdate, int, error) {
	type tally struct {
		acked   map[string]int64 // idempotency key -> delta
		unknown map[string]int64
		anon    int64 // acknowledged increments without idempotency key
		anonUnk []int64
	}
	ts := make(map[string]*tally)
	n := 0
	for _, o := range h.Ops {
		if o.Kind != Incr || o.Outcome == Rejected {
			continue
		}
		t := ts[o.Key]
		if t == nil {
			t = &tally{acked: map[string]int64{}, unknown: map[string]int64{}}
			ts[o.Key] = t
		}
		switch {
		case o.Outcome == Accepted && o.IdemKey == "":
			t.anon += o.Delta
			n++
		case o.Outcome == Accepted:
			if _, dup := t.acked[o.IdemKey]; !dup {
				n++
			}
			t.acked[o.IdemKey] = o.Delta
		case o.IdemKey == "":
			t.anonUnk = append(t.anonUnk, o.Delta)
		default:
			t.unknown[o.IdemKey] = o.Delta
		}
	}
	if h.Final == nil {
		return nil, n, nil
	}
	var out []LostUpdate
	for _, key := range sortedKeys(ts) {
		t := ts[key]
		init, err := parseCounter(h.Initial, key)
		if err != nil {
			return nil, 0, err
		}
		final, err := parseCounter(h.Final, key)
		if err != nil {
			return nil, 0, err
		}
		acked := t.anon
		for _, d := range t.acked {
			acked += d
		}
		var lo, hi, unk int64
		add := func(d int64) {
			unk += d
			if d < 0 {
				lo += d
			} else {
				hi += d
			}
		}
		for k, d := range t.unknown {
			if _, ok := t.acked[k]; !ok {
				add(d)
			}
		}
		for _, d := range t.anonUnk {
			add(d)
		}
		v := LostUpdate{Key: key, Final: strconv.FormatInt(final, 10), Acked: acked, Unknown: unk}
		switch {
		case final < init+acked+lo:
			v.Kind, v.Lost = CounterShort, init+acked+lo-final
		case final > init+acked+hi:
			v.Kind, v.Lost = CounterOver, final-(init+acked+hi)
		default:
			continue
		}
		v.Want = strconv.FormatInt(init+acked, 10)
		out = append(out, v)
	}
	return out, n, nil
}

func parseCounter(m map[string]string, key string) (int64, error) {
	s, ok := m[key]
	if !ok || s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: counter %q has value %q: %v", ErrInvalidHistory, key, s, err)
	}
	return n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmp.Compare[string])
	return ks
}
