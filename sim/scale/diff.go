package scale

import (
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/ownership/ring"
)

// errRingMismatch reports two rings that cannot be compared because they
// have different partition counts.
var errRingMismatch = errors.New("scale: rings have different partition counts")

// ringChange is what one member gains and loses between two rings. Both lists
// hold partitions in ascending order.
type ringChange struct {
	// Gained are the partitions the member owns in the new ring but not in
	// the old one.
	Gained []int
	// Lost are the partitions the member owns in the old ring but not in the
	// new one.
	Lost []int
}

// diffRings returns, for every member whose partitions differ between from and to,
// what it gained and lost. Members whose partitions are the same are absent.
// A nil ring counts as a ring without members, with the other ring's
// partition count. Rings with different partition counts cannot be compared:
// the error wraps errRingMismatch.
func diffRings(from, to *ring.Ring) (map[string]ringChange, error) {
	out := make(map[string]ringChange)
	if from == nil && to == nil {
		return out, nil
	}
	if from != nil && to != nil && from.Partitions() != to.Partitions() {
		return nil, fmt.Errorf("%w: %d and %d", errRingMismatch, from.Partitions(), to.Partitions())
	}
	p := max(from.Partitions(), to.Partitions())
	for part := range p {
		a, _ := from.Owner(part)
		b, _ := to.Owner(part)
		if a == b {
			continue
		}
		if a != "" {
			c := out[a]
			c.Lost = append(c.Lost, part)
			out[a] = c
		}
		if b != "" {
			c := out[b]
			c.Gained = append(c.Gained, part)
			out[b] = c
		}
	}
	return out, nil
}
