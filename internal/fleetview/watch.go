package fleetview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/watchstream"
)

// errStopped reports that the consumer stopped taking updates.
var errStopped = errors.New("fleet: consumer stopped")

// watch delivers the decoded events of the member, drain, claim,
// placement and spec watches after revision rev, merged in revision order
// at consistent cuts (see cut), until a watch fails, ctx ends or deliver
// returns false. The watches start at etcd's current revision; each
// says at creation the revision it watches after, and when the highest of
// these is above rev, watch delivers a catch-up listing read after the four
// were created and drops every event at or below the listing's revision:
// each watch delivers every event after its own start, so the listing and
// the events after it leave out nothing and repeat nothing.
func (r *Reader) watch(ctx context.Context, rev int64, timeout time.Duration, deliver func(Update) bool) error {
	wctx, cancel := context.WithCancel(watchstream.Own(clientv3.WithRequireLeader(ctx)))
	defer cancel()
	mch := r.Watcher.Watch(wctx, r.Layout.Members(), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	// No previous values: a deleted resize record is the one the reader's
	// shape knows (a deletion of another is ignored), and an embedded etcd
	// v3.7.3 that stops while a watch with previous values sends reads its
	// closed backend and panics.
	cch := r.Watcher.Watch(wctx, r.Layout.Claims(), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	dch := r.Watcher.Watch(wctx, r.Layout.DrainedPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithCreatedNotify())
	// One watch, so one ordered stream, for the placements and the spec: a
	// change of the ring algorithm and the deletion of placements that
	// agree with the new ring (a migration's end) must be applied in the
	// order they were written.
	pch := r.Watcher.Watch(wctx, r.Layout.Placements(), clientv3.WithRange(r.Layout.Spec()+"\x00"), clientv3.WithCreatedNotify())
	floor, err := r.started(ctx, rev, timeout, deliver, mch, cch, dch, pch)
	if err != nil {
		return err
	}
	c := newCut(floor)
	var again <-chan time.Time // a progress request went unanswered
	for {
		var (
			resp clientv3.WatchResponse
			ok   bool
			kind eventKind
			late bool
		)
		select {
		case resp, ok = <-mch:
			kind = memberEvents
		case resp, ok = <-cch:
			kind = claimEvents
		case resp, ok = <-dch:
			kind = drainEvents
		case resp, ok = <-pch:
			kind = placementEvents
		case <-again:
			ok, late = true, true
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case late:
		case resp.Err() != nil:
			return fmt.Errorf("%w (compact revision %d): %w", errWatchEnded, resp.CompactRevision, resp.Err())
		case !ok || resp.Canceled:
			return errWatchEnded
		default:
			c.add(kind, resp, r.decode(after(resp.Events, floor), kind))
		}
		if at, evs, moved := c.next(); moved && len(evs) > 0 {
			if !deliver(Update{Rev: at, Events: evs}) {
				return errStopped
			}
		}
		if c.ask(late) {
			// Answered on every watch of the stream its context names.
			_ = r.Watcher.RequestProgress(wctx)
			again = r.Clock.After(askAgain)
		} else if c.asked == 0 {
			again = nil
		}
	}
}

// started waits for the created response of each watch and returns the
// revision at or below which their events are already known: rev if no
// watch starts after it, else the revision of the catch-up listing it
// delivers.
func (r *Reader) started(ctx context.Context, rev int64, timeout time.Duration, deliver func(Update) bool, chans ...clientv3.WatchChan) (int64, error) {
	start := rev
	for _, ch := range chans {
		select {
		case resp, ok := <-ch:
			switch {
			case resp.Err() != nil:
				return 0, fmt.Errorf("%w at its start: %w", errWatchEnded, resp.Err())
			case !ok || resp.Canceled || !resp.Created:
				return 0, errWatchEnded
			}
			start = max(start, resp.Header.Revision)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if r.watching != nil {
		r.watching(start)
	}
	if start == rev {
		return rev, nil
	}
	lst := r.relist(ctx, timeout)
	if lst == nil {
		return 0, ctx.Err()
	}
	if !deliver(Update{Listing: lst, CatchUp: true}) {
		return 0, errStopped
	}
	return lst.Rev, nil
}

// after returns the events of evs after revision floor; evs is in
// revision order.
func after(evs []*clientv3.Event, floor int64) []*clientv3.Event {
	for i, ev := range evs {
		if ev.Kv.ModRevision > floor {
			return evs[i:]
		}
	}
	return nil
}

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
