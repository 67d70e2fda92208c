package check

import "fmt"

// EpochRegression is a tenure of a scope that began after another tenure
// of the scope with an equal or higher epoch.
type EpochRegression struct {
	Scope string
	// Prev is the tenure of highest epoch that began before Next.
	Prev, Next Tenure
}

func (v EpochRegression) String() string {
	return fmt.Sprintf("epoch did not increase: %v began after %v", v.Next, v.Prev)
}

// EpochResult is the result of Epochs.
type EpochResult struct {
	// Tenures counts the tenures checked.
	Tenures    int
	Violations []EpochRegression
}

// OK reports whether epochs strictly increased in every scope.
func (r EpochResult) OK() bool { return len(r.Violations) == 0 }

// Epochs checks that epochs strictly increase across successive tenures
// of each scope: a tenure must have a higher epoch than every tenure of
// its scope that began before it. Tenures that began at the same time are
// taken in epoch order. The same (scope, epoch, holder) recorded twice is
// one tenure, not a regression; the same epoch for two holders is one.
func Epochs(h *History) (EpochResult, error) {
	if err := h.Validate(); err != nil {
		return EpochResult{}, err
	}
	var res EpochResult
	if h == nil {
		return res, nil
	}
	res.Tenures = len(h.Tenures)
	for _, ts := range tenuresByScope(h) {
		best := 0
		for i := 1; i < len(ts); i++ {
			prev, next := ts[best], ts[i]
			if next.Epoch > prev.Epoch {
				best = i
				continue
			}
			if next.Epoch == prev.Epoch && next.Holder == prev.Holder {
				continue
			}
			res.Violations = append(res.Violations, EpochRegression{Scope: next.Scope, Prev: prev, Next: next})
		}
	}
	return res, nil
}
