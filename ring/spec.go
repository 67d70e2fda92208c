package ring

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Algorithm is the ring algorithm of a Config whose Algorithm is 0:
// AlgorithmBounded. Nodes that compute rings differently must never share
// a fleet, so the algorithm is part of the fleet's Spec.
const Algorithm = AlgorithmBounded

// Spec is a fleet's fixed configuration: what every node and every outside
// client must agree on to hash a key to the same partition and a partition
// to the same owner. The fleet stores it once in etcd, at <prefix>spec,
// written by the first node that joins (create-if-absent) and never changed
// by a node; a node whose configuration contradicts it is refused with a
// *SpecMismatchError (see Spec.Compare), and outside clients read it
// instead of being told. Its stored form is its JSON encoding.
type Spec struct {
	// Partitions is the fleet's partition count P.
	Partitions int `json:"partitions"`
	// LoadFactor is the ring's bounded-load factor.
	LoadFactor float64 `json:"load_factor"`
	// RingAlgorithm is the ring algorithm: AlgorithmBounded or
	// AlgorithmWeighted.
	RingAlgorithm int `json:"ring_algorithm"`
}

// Spec returns the fleet spec of c (a zero Algorithm is AlgorithmBounded).
func (c Config) Spec() Spec {
	return Spec{Partitions: c.Partitions, LoadFactor: c.LoadFactor, RingAlgorithm: c.algorithm()}
}

// Config returns the ring configuration of s. Its Algorithm is 0 for
// AlgorithmBounded, the zero value's algorithm.
func (s Spec) Config() Config {
	c := Config{Partitions: s.Partitions, LoadFactor: s.LoadFactor, Algorithm: s.RingAlgorithm}
	if c.Algorithm == AlgorithmBounded {
		c.Algorithm = 0
	}
	return c
}

// validate reports whether s can be used by this build: a valid ring
// configuration and a ring algorithm this build computes. Errors wrap
// ErrInvalidSpec.
func (s Spec) validate() error {
	if err := s.Config().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if s.RingAlgorithm != AlgorithmBounded && s.RingAlgorithm != AlgorithmWeighted {
		return fmt.Errorf("%w: ring algorithm %d (this build computes %d and %d)", ErrInvalidSpec, s.RingAlgorithm, AlgorithmBounded, AlgorithmWeighted)
	}
	return nil
}

// DecodeSpec parses a stored spec (the JSON encoding of a Spec) and checks
// that this build can use it: a valid ring configuration and a ring
// algorithm this build computes. Errors wrap ErrInvalidSpec.
func DecodeSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := s.validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
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
		local, fleet = strconv.Itoa(e.Local.RingAlgorithm), strconv.Itoa(e.Fleet.RingAlgorithm)
	}
	return "ring: configuration contradicts the fleet's spec: " + e.Field + " " + local +
		" here, " + fleet + " in the fleet (a fleet's spec never changes; use a new cluster name or prefix for a new one)"
}

// Is reports whether target is ErrSpecMismatch.
func (e *SpecMismatchError) Is(target error) bool { return target == ErrSpecMismatch }

// Compare returns a *SpecMismatchError if local differs from s, the fleet's
// spec; nil if they are equal.
func (s Spec) Compare(local Spec) error {
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
