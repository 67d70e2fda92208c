package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// LivenessSpec says what Liveness expects.
type LivenessSpec struct {
	// Scopes are the scopes that must be owned, such as every partition's
	// "p/<n>". Empty means every scope that has a tenure in the history.
	Scopes []string
	// From and Until bound the run's window; ownership is measured in
	// [From, Until]. Until must be after From.
	From, Until time.Duration
	// HealedAt is when the last fault healed. Gaps before it are measured
	// but allowed.
	HealedAt time.Duration
	// Bound is the longest a scope may stay unowned after HealedAt: the
	// part of any gap after HealedAt must not exceed it.
	Bound time.Duration
}

// Validate reports a spec that cannot be checked, as an error wrapping
// ErrInvalidConfig.
func (s LivenessSpec) Validate() error {
	if s.Until <= s.From {
		return fmt.Errorf("%w: liveness window until %v must be after from %v", ErrInvalidConfig, s.Until, s.From)
	}
	if s.Bound < 0 {
		return fmt.Errorf("%w: liveness bound %v must not be negative", ErrInvalidConfig, s.Bound)
	}
	return nil
}

// Gap is a time a scope was owned by nobody.
type Gap struct {
	Scope string
	// From and Until: the gap is [From, Until).
	From, Until time.Duration
}

// Len is the gap's length.
func (g Gap) Len() time.Duration { return g.Until - g.From }

func (g Gap) String() string {
	return fmt.Sprintf("%s unowned for %v [%v, %v)", g.Scope, g.Len(), g.From, g.Until)
}

// LivenessResult is the result of Liveness.
type LivenessResult struct {
	// Unowned is the total time, summed over scopes, that a scope was
	// owned by nobody in the window: Unowned.Seconds() is the
	// partition-seconds unowned.
	Unowned time.Duration
	// MaxGapAfterHeal is the longest part of a gap after HealedAt.
	MaxGapAfterHeal time.Duration
	// Gaps lists every gap, by scope then time.
	Gaps []Gap
	// Violations are the gaps whose part after HealedAt exceeds Bound,
	// clipped to start no earlier than HealedAt.
	Violations []Gap
}

// OK reports whether every scope was owned again within the bound.
func (r LivenessResult) OK() bool { return len(r.Violations) == 0 }

// Liveness measures, for each scope, when nobody held it, and checks that
// after the faults healed no scope stayed unowned longer than the bound.
// A scope is owned at a time if some tenure of it covers that time
// (tenures are [Start, End); a tenure still open covers the rest of the
// window), whoever holds it.
func Liveness(h *History, spec LivenessSpec) (LivenessResult, error) {
	if err := h.Validate(); err != nil {
		return LivenessResult{}, err
	}
	if err := spec.Validate(); err != nil {
		return LivenessResult{}, err
	}
	if h == nil {
		h = &History{}
	}
	var res LivenessResult
	byScope := make(map[string][]Tenure)
	for _, t := range h.Tenures {
		byScope[t.Scope] = append(byScope[t.Scope], t)
	}
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = sortedKeys(byScope)
	}
	for _, s := range scopes {
		ts := slices.Clone(byScope[s])
		slices.SortFunc(ts, func(a, b Tenure) int { return cmp.Compare(a.Start, b.Start) })
		covered := spec.From
		gap := func(until time.Duration) {
			if until <= covered {
				return
			}
			g := Gap{Scope: s, From: covered, Until: until}
			res.Gaps = append(res.Gaps, g)
			res.Unowned += g.Len()
			if after := (Gap{Scope: s, From: max(g.From, spec.HealedAt), Until: g.Until}); after.Until > after.From {
				res.MaxGapAfterHeal = max(res.MaxGapAfterHeal, after.Len())
				if after.Len() > spec.Bound {
					res.Violations = append(res.Violations, after)
				}
			}
		}
		for _, t := range ts {
			if t.End <= spec.From || t.End == t.Start {
				continue
			}
			if t.Start >= spec.Until {
				break
			}
			gap(t.Start)
			covered = max(covered, min(t.End, spec.Until))
		}
		gap(spec.Until)
	}
	return res, nil
}

// Failovers returns, for each scope, the time between the end of a tenure
// and the start of the next one (by epoch), for every successive pair of
// tenures where the earlier one ended: zero when the next began before
// the previous ended (a planned handoff that overlapped), in no particular
// order.
func Failovers(h *History) []time.Duration {
	if h == nil {
		return nil
	}
	var out []time.Duration
	byScope := make(map[string][]Tenure)
	for _, t := range h.Tenures {
		byScope[t.Scope] = append(byScope[t.Scope], t)
	}
	for _, s := range sortedKeys(byScope) {
		ts := byScope[s]
		slices.SortFunc(ts, func(a, b Tenure) int { return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Start, b.Start)) })
		for i := 1; i < len(ts); i++ {
			prev, next := ts[i-1], ts[i]
			if prev.End == Never {
				continue
			}
			out = append(out, max(0, next.Start-prev.End))
		}
	}
	return out
}
