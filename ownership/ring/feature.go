package ring

import "strings"

// FeatureError reports a protocol feature (such as "placements" or
// "weighted_ring") that a build does not understand. errors.Is(err,
// ErrFeatureUnsupported) holds.
//
// A node refused at Join gets one with Members empty: the fleet's spec
// records Feature in use and the node's own build lacks it. A command
// that needs Feature (a pin, a balancer's move, a ring-algorithm
// migration) gets one naming the live Members whose builds lack it; it
// succeeds once they are upgraded or gone.
type FeatureError struct {
	// Feature is the feature's name.
	Feature string
	// Members are the IDs of the live members that lack it, sorted; empty
	// when the build that lacks it is the caller's own.
	Members []string
}

// Error implements error.
func (e *FeatureError) Error() string {
	if len(e.Members) == 0 {
		return "ring: the fleet uses protocol feature " + quote(e.Feature) + ", which this build does not understand (run a newer build)"
	}
	return "ring: protocol feature " + quote(e.Feature) + " is not understood by member(s) " + strings.Join(e.Members, ", ") +
		" (upgrade them, or wait until they leave)"
}

// Is reports whether target is ErrFeatureUnsupported.
func (e *FeatureError) Is(target error) bool { return target == ErrFeatureUnsupported }

// quote returns s in double quotes.
func quote(s string) string { return `"` + s + `"` }
