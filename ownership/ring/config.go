package ring

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxPartitions is the largest partition count a ring accepts. Every
	// partition is one claim key in etcd, so real clusters stay far below it.
	MaxPartitions = 1 << 20

	// MaxWeight is the largest capacity weight a member may have. A ring
	// computed by AlgorithmWeighted hashes each member once per unit of
	// weight, so the total weight bounds its build time.
	MaxWeight = 64

	// MaxNodeIDLen is the longest node ID in bytes that ValidateNodeID
	// accepts: long enough for any DNS name.
	MaxNodeIDLen = 253
)

// Config holds the tunables of a Ring. Every node of a cluster must use
// the same Config, or their rings disagree.
type Config struct {
	// Partitions is P, the number of partitions. A key belongs to
	// partition xxhash64(key) mod P. It must be in [1, MaxPartitions].
	// Size it for at least 10x the largest expected fleet so that every
	// node gets many partitions and load evens out. A running fleet
	// changes it by a resize (fleet.Operator.Resize, tenurectl spec
	// resize) to P times or divided by a power of two: a key's partition
	// under 2P is its partition under P or that plus P, so each partition
	// splits into children (or children merge into their parent) group by
	// group, as planned moves, and data in the stores stays where it is.
	// The fleet's spec records the count in use; a node configured with
	// another is refused at Join unless it sets AdoptSpec (see the package
	// ownership documentation, "Changing the partition count").
	Partitions int

	// LoadFactor bounds how unevenly partitions are spread: no member owns
	// more than ceil(LoadFactor*P/N) of the P partitions when there are N
	// members (under AlgorithmWeighted, ceil(LoadFactor*P*weight/total
	// weight)+1). It must be a finite number >= 1. 1 gives the most even spread
	// but moves more partitions when members join or leave; larger values move
	// fewer partitions and allow more imbalance.
	LoadFactor float64

	// Algorithm is the assignment algorithm: AlgorithmWeighted or
	// AlgorithmBounded. It is recorded in the fleet's spec, so that a fleet
	// never mixes algorithms. Zero (unset) means the fleet's: a node or an
	// outside reader of a fleet whose spec exists adopts the algorithm it
	// records, and a new fleet records AlgorithmWeighted, as does Spec; a
	// Ring computed from a Config alone uses AlgorithmWeighted. Set it only
	// to assert an algorithm: a Config that names another one than the
	// fleet's spec is refused (ErrSpecMismatch).
	Algorithm Algorithm
}

// Member is a ring member and its capacity weight.
type Member struct {
	// ID is the node ID.
	ID string
	// Weight is the member's capacity weight, in [0, MaxWeight]; 0 means 1.
	Weight int
}

// algorithm returns c's algorithm, AlgorithmWeighted if it is unset.
func (c Config) algorithm() Algorithm {
	if c.Algorithm == 0 {
		return AlgorithmWeighted
	}
	return c.Algorithm
}

// DefaultConfig returns 1024 partitions (10x a fleet of 100 nodes), a load
// factor of 1.25 and an unset Algorithm: the fleet's, AlgorithmWeighted for
// a new fleet. 1.25 is the value the bounded-load consistent hashing paper
// (Mirrokni, Thorup and Zadimoghaddam) recommends: no node owns more than
// 25% above its share (its weight's share under AlgorithmWeighted, plus one
// partition). Under AlgorithmWeighted a join
// or a leave moves 1.0 to 1.2 times the minimal share of partitions on
// average, from 10 to 1,000 nodes; the count-only AlgorithmBounded moves
// about 1.06x at 3 to 20 nodes but 1.6x at 1,000 nodes of 4,096
// partitions (sim/scale/RESULTS.md), and ignores capacity weights.
func DefaultConfig() Config {
	return Config{Partitions: 1024, LoadFactor: 1.25}
}

// Validate reports whether c is usable. Errors wrap ErrInvalidPartitions,
// ErrInvalidLoadFactor or ErrInvalidAlgorithm.
func (c Config) Validate() error {
	if kind, field, detail := c.check(); kind != nil {
		return fmt.Errorf("%w: %s %s", kind, field, detail)
	}
	return nil
}

// check returns, for an invalid c, the sentinel, the field's name and what
// is wrong with its value; nil for a valid c.
func (c Config) check() (kind error, field, detail string) {
	switch {
	case c.Partitions <= 0:
		return ErrInvalidPartitions, "partition count", fmt.Sprintf("%d must be > 0", c.Partitions)
	case c.Partitions > MaxPartitions:
		return ErrInvalidPartitions, "partition count", fmt.Sprintf("%d must be <= %d", c.Partitions, MaxPartitions)
	case math.IsNaN(c.LoadFactor) || math.IsInf(c.LoadFactor, 0) || c.LoadFactor < 1:
		return ErrInvalidLoadFactor, "load factor", fmt.Sprintf("%v must be a finite number >= 1", c.LoadFactor)
	case c.Algorithm != 0 && !c.Algorithm.valid():
		return ErrInvalidAlgorithm, "ring algorithm", fmt.Sprintf("%d must be unset (0), %d (%v) or %d (%v)", int(c.Algorithm), int(AlgorithmBounded), AlgorithmBounded, int(AlgorithmWeighted), AlgorithmWeighted)
	}
	return nil, "", ""
}

// ValidateNodeID reports whether id can name a node: it must be 1 to
// MaxNodeIDLen bytes of valid UTF-8 made only of printable characters, with no
// '/', no white space and no control characters (NUL included). Errors wrap
// ErrInvalidNodeID and quote the ID.
func ValidateNodeID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidNodeID)
	}
	if len(id) > MaxNodeIDLen {
		return fmt.Errorf("%w: %q... is %d bytes (must be <= %d)", ErrInvalidNodeID, id[:32], len(id), MaxNodeIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidNodeID, id)
	}
	for i, r := range id {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %q has forbidden character %q at byte %d", ErrInvalidNodeID, id, r, i)
		}
	}
	return nil
}
