package fleet

// This file plans a ring-algorithm migration: which partitions its steps
// place, from a view of the fleet.

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// migrationPlacements returns the partitions placed by a migration,
// sorted.
func (v *view) migrationPlacements() []int {
	var out []int
	for _, p := range slices.Sorted(maps.Keys(v.fleet.Placements)) {
		if v.fleet.Placements[p].Origin == keys.OriginMigration {
			out = append(out, p)
		}
	}
	return out
}

// migrationPlan is what a migration to an algorithm still has to do in a
// view of the fleet.
type migrationPlan struct {
	writes  []ring.Placement // partitions to place on their target owners
	deletes []int            // migration placements no longer needed
	pending []int            // placed partitions whose claims have not moved yet
	placed  int              // partitions placed on their target owners
}

// planMigration compares every partition's owner under target, with the
// placements other than the migration's, to its owner under the fleet's
// algorithm with the same placements; partitions an operator pinned are
// left alone.
func (v *view) planMigration(target ring.Algorithm) (migrationPlan, error) {
	f := v.fleet
	ms := make([]ring.Member, len(f.IDs))
	for i, id := range f.IDs {
		ms[i] = ring.Member{ID: id, Weight: f.Weights[i]}
	}
	cfg := v.stored.Spec.Config()
	cfg.Algorithm = target
	base, err := ring.NewWeighted(ms, cfg)
	if err != nil {
		return migrationPlan{}, fmt.Errorf("fleet: the %v ring of the members: %w", target, err)
	}
	var keep []ring.Placement
	for _, p := range slices.Sorted(maps.Keys(f.Placements)) {
		if e := f.Placements[p]; e.Origin != keys.OriginMigration {
			keep = append(keep, ring.Placement{Partition: p, Node: e.Node})
		}
	}
	to, from := base.Place(keep), f.Base.Place(keep)
	var pl migrationPlan
	for p := range f.Claims {
		e, placed := f.Placements[p]
		if placed && e.Origin == keys.OriginPin {
			continue
		}
		t, _ := to.Owner(p)
		c, _ := from.Owner(p)
		mine := placed && e.Origin == keys.OriginMigration
		switch {
		case c != t && mine && e.Node == t:
			pl.placed++
			if f.Claims[p].Owner != t {
				pl.pending = append(pl.pending, p)
			}
		case c != t:
			pl.writes = append(pl.writes, ring.Placement{Partition: p, Node: t})
		case mine:
			pl.deletes = append(pl.deletes, p)
		}
	}
	return pl, nil
}

// migrationProgress reports the migration that runs in v.
func (v *view) migrationProgress() Migration {
	m := Migration{Target: ring.Algorithm(v.migration.Target), Budget: v.migration.Budget, From: v.stored.Spec.RingAlgorithm,
		Actor: v.migration.Actor, Reason: v.migration.Reason, Started: v.migration.Time, Revision: v.rev}
	if pl, err := v.planMigration(m.Target); err == nil {
		m.Moves, m.Placed = len(pl.writes)+len(pl.deletes), pl.placed
	}
	return m
}
