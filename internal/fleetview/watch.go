package fleetview

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/watchstream"
)

// errStopped reports that the consumer stopped taking updates.
var errStopped = errors.New("fleet: consumer stopped")

// watch delivers the decoded events of the members, drain marks, claims
// (the resize keys among them), placements and spec after revision rev
// until the watch fails, ctx ends or deliver returns false.
//
// They are followed on one watch, of the range from the claims' prefix to
// the spec's key, which holds the four prefixes and the spec (and keys of
// the fleet's that the reader ignores, such as the fence floors and the
// load reports), so that etcd delivers their changes as one stream in
// revision order, every change of a revision in one response: after each
// response the reader holds exactly what etcd held at the revision of its
// last event, a consistent cut (Update.Rev), and no change waits for
// another key set's. Four watches, one per key set, would each be in
// order, but not with each other.
//
// The watch starts at etcd's current revision and says at creation the
// revision it watches after; when that is above rev, watch delivers a
// catch-up listing read after it was created and drops every event at or
// below the listing's revision, so the listing and the events after it
// leave out nothing and repeat nothing.
func (r *Reader) watch(ctx context.Context, rev int64, timeout time.Duration, deliver func(Update) bool) error {
	wctx, cancel := context.WithCancel(watchstream.Own(clientv3.WithRequireLeader(ctx)))
	defer cancel()
	// No previous values: a deleted resize record is the one the reader's
	// shape knows (a deletion of another is ignored), and an embedded etcd
	// v3.7.3 that stops while a watch with previous values sends reads its
	// closed backend and panics.
	wch := r.Watcher.Watch(wctx, r.Layout.Claims(), clientv3.WithRange(r.Layout.Spec()+"\x00"), clientv3.WithCreatedNotify())
	floor, err := r.started(ctx, rev, timeout, deliver, wch)
	if err != nil {
		return err
	}
	for {
		var (
			resp clientv3.WatchResponse
			ok   bool
		)
		select {
		case resp, ok = <-wch:
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case resp.Err() != nil:
			return fmt.Errorf("%w (compact revision %d): %w", errWatchEnded, resp.CompactRevision, resp.Err())
		case !ok || resp.Canceled:
			return errWatchEnded
		}
		evs := r.decode(after(resp.Events, floor))
		if len(evs) == 0 {
			continue
		}
		// The revision of the last event, not the response's header: a
		// watch catching up from etcd's history may send a batch of
		// revisions under a header of a later one.
		if !deliver(Update{Rev: resp.Events[len(resp.Events)-1].Kv.ModRevision, Events: evs}) {
			return errStopped
		}
	}
}

// started waits for the created response of the watch and returns the
// revision at or below which its events are already known: rev if the
// watch does not start after it, else the revision of the catch-up listing
// it delivers.
func (r *Reader) started(ctx context.Context, rev int64, timeout time.Duration, deliver func(Update) bool, ch clientv3.WatchChan) (int64, error) {
	start := rev
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
