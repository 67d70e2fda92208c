package scenario

import (
	"fmt"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/check"
)

const (
	ringPartitions = 71
	ringLoad       = 1.25
)

// ringMembers are adversarial IDs: "node-1"+"1" and "node-11"+"" ... collide
// as virtual-node keys built as name+index.
var ringMembers = []string{"node-1", "node-11", "node-12", "node-2"}

type member string

func (m member) String() string { return string(m) }

type xxh struct{}

func (xxh) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// viewOrder is the order in which node self learned the members: itself
// first, then the others in ID order (as a watch might deliver them).
func viewOrder(self string, members []string) []string {
	out := []string{self}
	for _, m := range members {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}

// owners computes every partition's owner as node self sees the members.
func owners(self string, members []string, protected bool, partitions int) (own []string, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	order := viewOrder(self, members)
	own = make([]string, partitions)
	if protected {
		r, err := ring.New(order, ring.Config{Partitions: partitions, LoadFactor: ringLoad})
		if err != nil {
			return nil, "error: " + err.Error()
		}
		for p := range own {
			own[p], _ = r.Owner(p)
		}
		return own, ""
	}
	ms := make([]consistent.Member, len(order))
	for i, m := range order {
		ms[i] = member(m)
	}
	c := consistent.New(ms, consistent.Config{PartitionCount: partitions, ReplicationFactor: 20, Load: ringLoad, Hasher: xxh{}})
	for p := range own {
		if m := c.GetPartitionOwner(p); m != nil {
			own[p] = m.String()
		}
	}
	return own, ""
}

// ringCollision: every node computes the ring from its own view of the
// members and serves (writes) the partitions it believes it owns; then a
// fleet with more members than partitions computes its ring. Off:
// buraksezer/consistent; on: ring.Ring.
func ringCollision(protected bool) (Outcome, error) {
	var out Outcome
	var rec check.Recorder
	believers := map[int][]string{}
	for _, self := range ringMembers {
		own, p := owners(self, ringMembers, protected, ringPartitions)
		if p != "" {
			out.Panic = p
			continue
		}
		for part, o := range own {
			if o == self {
				believers[part] = append(believers[part], self)
			}
		}
	}
	t := 0
	for part := range ringPartitions {
		scope := fence.PartitionScope(part)
		for _, self := range believers[part] {
			rec.BeginTenure(scope, 1, self, 0)
			id := rec.InvokeWrite(check.Write{Key: scope, Scope: scope, Epoch: 1, Writer: self, Value: self})
			rec.Applied(id, 0)
			rec.ReturnWrite(id, check.Accepted, 0)
			t++
		}
		if n := len(believers[part]); n > 1 {
			out.Notes = append(out.Notes, fmt.Sprintf("partition %d served by %v", part, believers[part]))
		}
	}
	// More members than partitions.
	many := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	own, p := owners("a", many, protected, 4)
	if p != "" {
		out.Panic = p
		out.Notes = append(out.Notes, "8 members, 4 partitions: panic: "+p)
	} else {
		out.Notes = append(out.Notes, fmt.Sprintf("8 members, 4 partitions: owners %v", own))
	}
	if slices.Contains(own, "") && !protected {
		out.Notes = append(out.Notes, "unowned partitions")
	}
	var err error
	out.Report, err = check.All(rec.History(), check.Config{})
	return out, err
}
