package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// waitSettled waits until every partition is served by the owner that the
// ring of the running nodes gives it: the Client sees that owner's claim,
// and the owner has raised the store's floor to the claim's epoch and serves
// it.
func (d *demo) waitSettled(ctx context.Context) error {
	r, err := ring.New(d.fleet.ids(), d.fleet.ring)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		wait := d.unsettled(r)
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("partitions not settled: %w", ctx.Err())
		}
	}
}

// unsettled returns nil if every partition is served by its owner on r, or
// else a channel that is closed when the view that is lagging changes.
func (d *demo) unsettled(r *ring.Ring) <-chan struct{} {
	for p := range r.Partitions() {
		changed := d.client.Changed()
		route := d.client.LookupPartition(p)
		if want, _ := r.Owner(p); route.Epoch == 0 || route.Owner != want {
			return changed
		}
		n := d.fleet.get(route.Owner)
		if n == nil {
			return changed
		}
		changed = n.node.Changed()
		if local := n.node.LookupPartition(p); !local.Local || local.Epoch != route.Epoch {
			return changed
		}
	}
	return nil
}

// ownedBy counts the partitions the Client sees claimed by id.
func (d *demo) ownedBy(id string) int {
	n := 0
	for p := range d.cfg.Partitions {
		if d.client.LookupPartition(p).Owner == id {
			n++
		}
	}
	return n
}
