package main

import (
	"context"
	"errors"
	"time"

	"github.com/tenure-go/tenure/fence"
)

// events makes the fleet changes at their thresholds.
func (d *demo) events(ctx context.Context) error {
	n := int64(d.cfg.Increments)
	ids := d.fleet.ids()
	if err := d.waitAcked(ctx, n/4); err != nil {
		return err
	}
	if err := d.crash(ctx, ids[1]); err != nil {
		return err
	}
	if err := d.waitAcked(ctx, n/2); err != nil {
		return err
	}
	if err := d.join(ctx); err != nil {
		return err
	}
	if err := d.waitAcked(ctx, 3*n/4); err != nil {
		return err
	}
	return d.leave(ctx, ids[2])
}

// crash kills id while some of its requests are paused between their read
// and their write; once its partitions are served again by others, the
// paused requests resume and write with their old tokens.
func (d *demo) crash(ctx context.Context, id string) error {
	p := d.fleet.app.pauseNext(id, d.cfg.Paused)
	for range d.cfg.Paused {
		select {
		case <-p.paused:
		case <-ctx.Done():
			return errStopped
		}
	}
	parts := d.ownedBy(id)
	t0 := time.Now()
	d.fleet.kill(id)
	d.line("kill %s (no handoff, %d requests paused mid-write); its %d partitions wait for its lease to expire", id, d.cfg.Paused, parts)
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	took := time.Since(t0)
	d.rep.Events = append(d.rep.Events, Event{What: "kill " + id + " (crash, failover)", Partitions: parts, Took: took})
	close(p.resume)
	var rejected, accepted int
	for range d.cfg.Paused {
		err := <-p.results
		switch {
		case errors.Is(err, fence.ErrStale):
			rejected++
		case err == nil:
			accepted++
		}
	}
	d.rep.StaleAccepted += int64(accepted)
	d.line("failover done in %v; %s's %d paused writes resumed: %d rejected as stale, %d accepted", ms(took), id, d.cfg.Paused, rejected, accepted)
	return nil
}

// join adds a node and waits for the partitions the ring gives it.
func (d *demo) join(ctx context.Context) error {
	id := d.newID()
	t0 := time.Now()
	if _, err := d.fleet.start(ctx, id); err != nil {
		return err
	}
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	took := time.Since(t0)
	parts := d.ownedBy(id)
	d.rep.Events = append(d.rep.Events, Event{What: "join " + id, Partitions: parts, Took: took})
	d.line("join %s: %d partitions handed to it in %v", id, parts, ms(took))
	return nil
}

// leave removes id gracefully and waits for its partitions' new owners.
func (d *demo) leave(ctx context.Context, id string) error {
	parts := d.ownedBy(id)
	t0 := time.Now()
	n, err := d.fleet.leave(ctx, id)
	if n != nil {
		defer n.stop("left")
	}
	if err != nil {
		return err
	}
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	took := time.Since(t0)
	d.rep.Events = append(d.rep.Events, Event{What: "leave " + id + " (graceful)", Partitions: parts, Took: took})
	d.line("leave %s: %d partitions handed off in %v", id, parts, ms(took))
	return nil
}
