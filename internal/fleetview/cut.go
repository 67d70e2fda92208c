package fleetview

import (
	"cmp"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// askAgain is how long a cut waits for the progress it asked for before it
// asks again: etcd answers a progress request only while every watch of
// the stream has caught up, and drops it otherwise.
const askAgain = 25 * time.Millisecond

// watches is the number of watches a Reader follows the fleet with: the
// members', the claims', the drain marks' and the placements' (with the
// spec).
const watches = 4

// cut merges the events of the Reader's watches into one stream in
// revision order, and delivers them only up to a consistent cut: a
// revision through which every watch is known to have delivered every
// event. A watch is known to have delivered everything up to the revision
// of its latest event, and, after a progress notification, up to the
// notification's revision (etcd sends one on a watch stream only when
// every watch of the stream has sent every event up to it). Events above
// the cut are held until it passes them, and a held event makes the cut
// ask etcd for progress. So a reader that applies the cut's updates holds,
// at the revision it reports, exactly what etcd held at that revision.
type cut struct {
	marks [watches]int64 // by eventKind: the watch has delivered every event up to it
	at    int64          // the revision delivered up to
	held  []Event        // decoded events above the cut, in arrival order
	asked int64          // the highest held revision when progress was last asked for; 0 if not outstanding
}

// newCut returns a cut at revision floor: every event at or below it is
// already known.
func newCut(floor int64) *cut {
	c := &cut{at: floor}
	for i := range c.marks {
		c.marks[i] = floor
	}
	return c
}

// add records a response of the watch of the given kind: its progress,
// and its events decoded (those above the cut).
func (c *cut) add(kind eventKind, resp clientv3.WatchResponse, decoded []Event) {
	mark := &c.marks[kind]
	if resp.IsProgressNotify() {
		*mark = max(*mark, resp.Header.Revision)
		return
	}
	if n := len(resp.Events); n > 0 {
		*mark = max(*mark, resp.Events[n-1].Kv.ModRevision)
	}
	c.held = append(c.held, decoded...)
}

// next returns the revision of the cut and the held events at or below
// it, in revision order, and removes them; ok is false when the cut has
// not moved.
func (c *cut) next() (rev int64, evs []Event, ok bool) {
	rev = slices.Min(c.marks[:])
	if rev <= c.at {
		return c.at, nil, false
	}
	c.at = rev
	if c.asked != 0 && c.asked <= rev {
		c.asked = 0
	}
	keep := c.held[:0:0]
	for _, e := range c.held {
		if e.Rev <= rev {
			evs = append(evs, e)
		} else {
			keep = append(keep, e)
		}
	}
	c.held = keep
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Rev, b.Rev) })
	return rev, evs, true
}

// ask returns whether progress should be asked for now: events are held
// and no request for them is outstanding (again is true when the last
// request went unanswered for askAgain). It records the request.
func (c *cut) ask(again bool) bool {
	if len(c.held) == 0 {
		c.asked = 0
		return false
	}
	if c.asked != 0 && !again {
		return false
	}
	c.asked = slices.MaxFunc(c.held, func(a, b Event) int { return cmp.Compare(a.Rev, b.Rev) }).Rev
	return true
}
