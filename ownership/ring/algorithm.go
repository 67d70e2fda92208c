package ring

import (
	"fmt"
	"strconv"
)

// Algorithm is a ring assignment algorithm, as a fleet's Spec records it.
// Its zero value is unset: in a Config, it means the fleet's algorithm
// (the one its Spec records) and, for a fleet that has no spec yet or a
// Ring computed from a Config alone, AlgorithmWeighted.
//
// Its text form (String, MarshalText, and so its JSON in reports) is its
// name: "bounded" or "weighted". A fleet's stored spec records it as its
// number (see Spec), which every build of tenure reads.
type Algorithm int

// The ring's assignment algorithms. Their numbers are the ones stored
// specs record and never change.
const (
	// AlgorithmBounded, named "bounded", is bounded-load consistent
	// hashing by partition count (buraksezer/consistent's algorithm; see
	// Ring): count-only, every member has weight 1 whatever it publishes.
	AlgorithmBounded Algorithm = 1

	// AlgorithmWeighted, named "weighted", is bounded-load weighted
	// rendezvous hashing, the algorithm of a new fleet: a member's score
	// for a partition is the largest of one hash per unit of its weight,
	// and partitions go to members by the stable matching of that score
	// under the members' capacities, ceil(LoadFactor*P*weight/total
	// weight)+1 (at most P): no partition and member would both rather be
	// together than where they are. A member's share of partitions follows
	// its weight, and a join or a leave moves little more than the share
	// of the member that came or went (1.0 to 1.2 times it on average at 10
	// to 1,000 members; see sim/scale/RESULTS.md), since a member's scores depend on
	// nothing but its own ID and weight and the matching on no order of
	// the partitions.
	AlgorithmWeighted Algorithm = 2
)

// The names of the algorithms, their text form.
const (
	nameBounded  = "bounded"
	nameWeighted = "weighted"
)

// String returns a's name: "bounded", "weighted", "unset" for the zero
// value, and "Algorithm(n)" for a number no build defines.
func (a Algorithm) String() string {
	switch a {
	case 0:
		return "unset"
	case AlgorithmBounded:
		return nameBounded
	case AlgorithmWeighted:
		return nameWeighted
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// valid reports whether a is an algorithm this build computes.
func (a Algorithm) valid() bool { return a == AlgorithmBounded || a == AlgorithmWeighted }

// MarshalText returns a's name, and an empty text for the zero value. An
// algorithm this build does not define is an error wrapping
// ErrInvalidAlgorithm.
func (a Algorithm) MarshalText() ([]byte, error) {
	if a == 0 {
		return []byte{}, nil
	}
	if !a.valid() {
		return nil, fmt.Errorf("%w: %d", ErrInvalidAlgorithm, int(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText sets a from its name ("bounded" or "weighted"; empty text
// is the zero value). Any other text is an error wrapping
// ErrInvalidAlgorithm.
func (a *Algorithm) UnmarshalText(text []byte) error {
	switch string(text) {
	case "":
		*a = 0
	case nameBounded:
		*a = AlgorithmBounded
	case nameWeighted:
		*a = AlgorithmWeighted
	default:
		return fmt.Errorf("%w: %q (must be %q or %q)", ErrInvalidAlgorithm, text, nameBounded, nameWeighted)
	}
	return nil
}
