package ring

import (
	"fmt"
	"strconv"
)

// Spec is a fleet's fixed configuration: what every node and every outside
// client must agree on to hash a key to the same partition and a partition
// to the same owner. The fleet stores it once in etcd, at <prefix>spec,
// written by the first node that joins (create-if-absent) and never changed
// by a node; a node whose configuration contradicts it is refused with a
// *SpecMismatchError (see Spec.CompareConfig), and outside clients read it
// instead of being told.
//
// etcd stores it as JSON with the algorithm as its number
// ({"partitions":1024,"load_factor":1.25,"ring_algorithm":2}), the form
// every build of tenure reads and writes; its own JSON encoding, for
// reports, names the algorithm ("weighted").
type Spec struct {
	// Partitions is the fleet's partition count P.
	Partitions int `json:"partitions"`
	// LoadFactor is the ring's bounded-load factor.
	LoadFactor float64 `json:"load_factor"`
	// RingAlgorithm is the ring algorithm: AlgorithmWeighted or
	// AlgorithmBounded.
	RingAlgorithm Algorithm `json:"ring_algorithm"`
}

// Spec returns the fleet spec that c creates in a fleet that has none: an
// unset Algorithm is AlgorithmWeighted.
func (c Config) Spec() Spec {
	return Spec{Partitions: c.Partitions, LoadFactor: c.LoadFactor, RingAlgorithm: c.algorithm()}
}

// Config returns the ring configuration of s, its algorithm set.
func (s Spec) Config() Config {
	return Config{Partitions: s.Partitions, LoadFactor: s.LoadFactor, Algorithm: s.RingAlgorithm}
}

// SpecMismatchError reports a configuration that contradicts the fleet's
// spec in etcd. errors.Is(err, ErrSpecMismatch) holds.
type SpecMismatchError struct {
	// Field names the first field that differs: "partitions", "load factor"
	// or "ring algorithm".
	Field string
	// Fleet is the spec stored in etcd; Local is the one this process was
	// configured with.
	Fleet, Local Spec
	// ResizingTo is the partition count a resize in progress moves the
	// fleet to (0: none); Fleet.Partitions is then the count it started
	// from.
	ResizingTo int
}

// Error implements error.
func (e *SpecMismatchError) Error() string {
	var local, fleet string
	switch e.Field {
	case "partitions":
		local, fleet = strconv.Itoa(e.Local.Partitions), strconv.Itoa(e.Fleet.Partitions)
	case "load factor":
		local, fleet = fmt.Sprint(e.Local.LoadFactor), fmt.Sprint(e.Fleet.LoadFactor)
	default:
		local, fleet = e.Local.RingAlgorithm.String(), e.Fleet.RingAlgorithm.String()
	}
	if e.Field == "partitions" {
		if e.ResizingTo != 0 {
			fleet += ", resizing to " + strconv.Itoa(e.ResizingTo)
		}
		return "ring: configuration contradicts the fleet's spec: partitions " + local + " here, " + fleet +
			" in the fleet (the partition count changes only by a resize of it; configure the fleet's count, or adopt the fleet's spec)"
	}
	return "ring: configuration contradicts the fleet's spec: " + e.Field + " " + local +
		" here, " + fleet + " in the fleet (this field of a fleet's spec never changes; use a new cluster name or prefix for a new one)"
}

// Is reports whether target is ErrSpecMismatch.
func (e *SpecMismatchError) Is(target error) bool { return target == ErrSpecMismatch }

// compare returns a *SpecMismatchError if local differs from s, the fleet's
// spec; nil if they are equal.
func (s Spec) compare(local Spec) error {
	field := ""
	switch {
	case s.Partitions != local.Partitions:
		field = "partitions"
	case s.LoadFactor != local.LoadFactor:
		field = "load factor"
	case s.RingAlgorithm != local.RingAlgorithm:
		field = "ring algorithm"
	default:
		return nil
	}
	return &SpecMismatchError{Field: field, Fleet: s, Local: local}
}

// CompareConfig returns a *SpecMismatchError if c contradicts s, the
// fleet's spec; nil if a process configured with c can use s. An unset
// Algorithm of c agrees with the fleet's: such a process adopts it (it
// uses s.Config()).
func (s Spec) CompareConfig(c Config) error {
	local := Spec{Partitions: c.Partitions, LoadFactor: c.LoadFactor, RingAlgorithm: c.Algorithm}
	if local.RingAlgorithm == 0 {
		local.RingAlgorithm = s.RingAlgorithm
	}
	return s.compare(local)
}
