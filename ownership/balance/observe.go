package balance

import (
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// snapshot is what a pass saw of the fleet: the owner of every partition
// by the fleet's rule and the placements, at one revision.
type snapshot struct {
	rev        int64
	owners     []string // by partition; "" while no member serves
	placements map[int]fleetview.Placement
}

func newSnapshot(lst *fleetview.Listing, r *ring.Ring) *snapshot {
	s := &snapshot{rev: lst.Rev, owners: make([]string, r.Partitions()), placements: lst.Placements}
	for p := range s.owners {
		s.owners[p], _ = r.Owner(p)
	}
	return s
}

// observe counts the partitions whose owner changed between the previous
// snapshot and cur by cause, and keeps cur for the next. A snapshot older
// than the previous one (passes planned concurrently) is ignored.
func (b *Balancer) observe(cur *snapshot) {
	b.mu.Lock()
	prev := b.last
	if prev != nil && cur.rev <= prev.rev {
		b.mu.Unlock()
		return
	}
	b.last = cur
	b.mu.Unlock()
	if prev == nil || len(prev.owners) != len(cur.owners) {
		return
	}
	pins, members := 0, 0
	for p, owner := range cur.owners {
		if owner == "" || owner == prev.owners[p] {
			continue
		}
		switch movedBy(prev.placements, cur.placements, p) {
		case keys.OriginPin:
			pins++
		case keys.OriginBalance:
			// counted by the balancer whose pass wrote it
		default:
			members++
		}
	}
	b.metrics.moves("pin", pins)
	b.metrics.moves("membership", members)
}

// movedBy returns why partition p changed owner between two snapshots'
// placements: keys.OriginPin if a pin was written or deleted,
// keys.OriginBalance if a balancer's move was written, "" otherwise (the
// members changed; a balancer move deleted because its node left counts
// so too).
func movedBy(prev, cur map[int]fleetview.Placement, p int) string {
	was, had := prev[p]
	now, has := cur[p]
	switch {
	case has && (!had || now.ModRev != was.ModRev):
		return now.Origin
	case had && !has && was.Origin == keys.OriginPin:
		return keys.OriginPin
	}
	return ""
}
