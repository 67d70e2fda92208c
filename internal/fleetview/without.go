package fleetview

import (
	"slices"

	"github.com/tenure-go/tenure/ownership/ring"
)

// without is the ring of a State without one of its members: the ring the
// fleet computes once that member has left.
type without struct {
	id   string
	src  *ring.Ring // the State's Ring it was computed with (a new one for each member set or placement change)
	ring *ring.Ring // placements applied
}

// OwnerWithout returns the owner of partition p by the ring without
// member id (placements included), as the fleet will compute it once id
// has left: the successor of a node that leaves. Outside a resize only;
// the ring is computed once per member set and placement change.
func (f *State) OwnerWithout(p int, id string) (string, bool) {
	i := slices.Index(f.IDs, id)
	if i < 0 || f.Base == nil {
		return f.Owner(p)
	}
	if w := f.without; w == nil || w.id != id || w.src != f.Ring {
		ms := make([]ring.Member, 0, len(f.IDs)-1)
		for j, m := range f.IDs {
			if j != i {
				ms = append(ms, ring.Member{ID: m, Weight: f.Weights[j]})
			}
		}
		if len(ms) == 0 {
			return "", false
		}
		r, err := ring.NewWeighted(ms, f.ringCfg)
		if err != nil { // cannot happen: the members are the base ring's
			return "", false
		}
		f.without = &without{id: id, src: f.Ring, ring: r.Place(f.PlacementList())}
	}
	return f.without.ring.Owner(p)
}
