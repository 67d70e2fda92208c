package scale

import (
	"context"
	"math/rand/v2"
	"time"
)

// loadReports runs the stable fleet for d of virtual time with noisy load
// on every partition: each step, every live node counts 1 to 3 units of
// work on each partition it owns (Node.AddPartitionLoad), so that its load
// meter has a changed report to write at every report interval. The
// phase's etcd writes are then the nodes' load reports: nothing else
// writes in a stable fleet.
func (f *fleet) loadReports(ctx context.Context, ph *Phase, d time.Duration) error {
	want, err := f.expected()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(f.cfg.Seed, 0x6c6f6164)) // "load"
	q := newQuiescence(f)
	start, wallStart := f.fc.Now(), time.Now()
	for f.fc.Since(start) < d {
		if err := q.wait(ctx); err != nil {
			return err
		}
		for _, id := range f.liveIDs() {
			n := f.members[id].node
			for _, p := range want.Owned(id) {
				if err := n.AddPartitionLoad(p, 1+rng.Uint64N(3)); err != nil {
					return err
				}
			}
		}
		f.fc.Advance(f.cfg.Step)
		ph.Steps++
	}
	if err := q.wait(ctx); err != nil {
		return err
	}
	ph.Virtual = f.fc.Since(start)
	ph.MaxVirtual = ph.Virtual
	ph.MaxWall = time.Since(wallStart)
	return nil
}
