package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/ring"
)

// waitSettled waits until every partition is served by the owner the ring
// of the running nodes gives it: the client sees that owner's claim, and the
// owner has raised the store's floor to the claim's epoch and serves it.
// gone, if set, names a node that must own nothing.
func (d *demo) waitSettled(ctx context.Context, gone string) error {
	ring, err := ring.New(d.fleet.ids(), ring.Config{Partitions: d.cfg.Partitions, LoadFactor: 1.25})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		wait := d.unsettled(ring, gone)
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

// unsettled returns nil if every partition is served by its ring owner, or
// else a channel that is closed when the view that is lagging changes.
func (d *demo) unsettled(ring *ring.Ring, gone string) <-chan struct{} {
	for p := range d.cfg.Partitions {
		changed := d.client.Changed()
		r := d.client.LookupPartition(p)
		want, _ := ring.Owner(p)
		if r.Epoch == 0 || r.Owner != want || r.Owner == gone {
			return changed
		}
		n := d.fleet.get(want)
		if n == nil {
			return changed
		}
		changed = n.node.Changed()
		if local := n.node.LookupPartition(p); !local.Local || local.Epoch != r.Epoch {
			return changed
		}
	}
	return nil
}

// ownedBy counts the partitions the client sees claimed by id.
func (d *demo) ownedBy(id string) int {
	n := 0
	for p := range d.cfg.Partitions {
		if d.client.LookupPartition(p).Owner == id {
			n++
		}
	}
	return n
}
