package fleet

import (
	"github.com/tenure-go/tenure/internal/fleetview"
)

// resizeWait is why a resize's driver waits: the first group that holds
// the resize, one of its partitions and that partition's holder.
type resizeWait struct {
	group, partition int
	holder           string // the claim's owner; the ring's owner if unclaimed
	epoch            int64  // the claim's epoch; 0 if unclaimed
	reason           string
}

// waitOf returns why the resize of f's shape cannot take its next step,
// ok false if no group holds it (the driver only polls). A group that
// changed phase waits for a holder of its active partitions to retire the
// partitions they replaced at every fencer (its fenced key), and one that
// is asked to move for the holders of its partitions to hand them off.
func waitOf(f *fleetview.State) (resizeWait, bool) {
	s := f.Shape
	rs := s.Resize
	if rs == nil {
		return resizeWait{}, false
	}
	for g := range rs.Small() {
		changed := s.IsDone(g)
		if s.Aborting() {
			changed = !s.IsDone(g) && s.Back[g] != 0
		}
		switch {
		case changed && !s.Fenced[g]:
			ps := s.Targets(g)
			if s.Aborting() {
				ps = s.Sources(g)
			}
			for _, p := range ps {
				if c := f.Claims[p]; c.Epoch != 0 {
					return resizeWait{group: g, partition: p, holder: c.Owner, epoch: c.Epoch,
						reason: "its holder has not marked the group fenced: its fencers are not all raised (failing or slow)"}, true
				}
			}
			holder, _ := f.Owner(ps[0])
			return resizeWait{group: g, partition: ps[0], holder: holder, reason: "unclaimed: waiting for its owner to claim it"}, true
		case s.Moving[g]:
			for _, p := range append(s.Sources(g), s.Targets(g)...) {
				if c := f.Claims[p]; c.Epoch != 0 && s.Leaving(p) {
					return resizeWait{group: g, partition: p, holder: c.Owner, epoch: c.Epoch,
						reason: "asked to move: waiting for its holder to hand it off"}, true
				}
			}
		}
	}
	return resizeWait{}, false
}

// explainWait logs why the driver waits, once per reason: the group, the
// partition and its holder that hold the resize.
func (d *driver) explainWait(f *fleetview.State) {
	w, ok := waitOf(f)
	same := w
	same.epoch = d.waited.epoch // a holder that claims again at another epoch waits for the same
	if !ok || same == d.waited {
		return
	}
	d.waited = w
	d.log.Info("resize: waiting", "resize", f.Shape.Resize.ID, "group", w.group, "partition", w.partition,
		"holder", w.holder, "epoch", w.epoch, "reason", w.reason)
}
