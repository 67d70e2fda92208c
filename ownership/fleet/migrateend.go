package fleet

// This file ends a ring-algorithm migration: the deletion of its
// placements after the flip, and its abort.

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanup deletes the migration's placements left when no migration runs
// (after a flip, they agree with the ring: deleting them moves nothing),
// and reports the migration done.
func (o *Operator) cleanup(ctx context.Context, m Migration, a Action) (Migration, error) {
	for {
		v, err := o.view(ctx)
		if err != nil {
			return Migration{}, err
		}
		left := v.migrationPlacements()
		if len(left) == 0 || v.migration != nil {
			return Migration{Target: m.Target, Budget: m.Budget, From: v.stored.Spec.RingAlgorithm, Done: v.migration == nil && v.stored.Spec.RingAlgorithm == m.Target,
				Revision: v.rev}, nil
		}
		if err := o.deletePlacements(ctx, v, left, actionCleanup, a, false); err != nil {
			return Migration{}, err
		}
	}
}

// abortMigration deletes the migration's record and its placements.
func (o *Operator) abortMigration(ctx context.Context, a Action) (Migration, error) {
	first := true
	for {
		v, err := o.view(ctx)
		if err != nil {
			return Migration{}, err
		}
		left := v.migrationPlacements()
		if first && v.migration == nil && len(left) == 0 {
			return Migration{}, fmt.Errorf("fleet: abort the migration: %w: no migration runs", ErrNotFound)
		}
		first = false
		if v.migration == nil && len(left) == 0 {
			o.log.Info("migration aborted", "algorithm", v.stored.Spec.RingAlgorithm, "revision", v.rev)
			return Migration{Abort: true, From: v.stored.Spec.RingAlgorithm, Target: v.stored.Spec.RingAlgorithm, Done: true, Revision: v.rev}, nil
		}
		if err := o.deletePlacements(ctx, v, left, actionAbort, a, v.migration != nil); err != nil {
			return Migration{}, err
		}
	}
}

// deletePlacements deletes up to maxStepMoves of the placements ps, and
// the migration's record if record is set, in one transaction guarded by
// what v read, with an audit record of action.
func (o *Operator) deletePlacements(ctx context.Context, v *view, ps []int, action string, a Action, record bool) error {
	rec, ak := o.newRecord(a, action, migrationTarget)
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	if record {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(o.layout.Migration()), "=", v.migrationRev))
		ops = append(ops, clientv3.OpDelete(o.layout.Migration()))
	}
	for _, p := range ps[:min(len(ps), maxStepMoves)] {
		k := o.layout.Placement(p)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", v.fleet.Placements[p].ModRev))
		ops = append(ops, clientv3.OpDelete(k))
		rec.Partitions = append(rec.Partitions, p)
	}
	ops = append(ops, clientv3.OpPut(ak, encodeRecord(rec)))
	resp, err := o.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("fleet: %s: %w", action, err)
	}
	if resp.Succeeded {
		o.log.Info("migration placements deleted", "action", action, "placements", len(rec.Partitions), "revision", resp.Header.Revision)
	}
	return nil
}
