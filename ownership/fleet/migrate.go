package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// The audit actions of a ring-algorithm migration; their Target is
// migrationTarget.
const (
	actionMigrate = "algorithm-migrate" // the migration's record was written
	actionStep    = "algorithm-step"    // a step placed partitions on their owners under the target
	actionFlip    = "algorithm-flip"    // the spec records the target algorithm
	actionCleanup = "algorithm-cleanup" // placements left by a flip were deleted
	actionAbort   = "algorithm-abort"   // the migration's record and placements were deleted
)

// migrationTarget is the AuditRecord target of a migration's actions.
const migrationTarget = "spec/ring_algorithm"

// maxStepMoves caps a step's moves: each costs an operation and two
// comparisons of the step's transaction, which etcd caps at 128 by default.
const maxStepMoves = 60

// settleEvery is how often a migration reads the fleet while it waits for
// a step's moves to complete.
const settleEvery = 50 * time.Millisecond

// Migration asks for, and reports, a change of the fleet's ring algorithm
// (MigrateAlgorithm); Status reports the one that runs.
type Migration struct {
	// Target is the algorithm to migrate to: ring.AlgorithmWeighted or
	// ring.AlgorithmBounded.
	Target ring.Algorithm `json:"target"`
	// Budget is the most partitions one step moves: 0 means 1% of the
	// partitions (at least 1, at most 60); at most 60. A migration resumed
	// takes steps of the budget of the call that resumes it.
	Budget int `json:"budget"`
	// DryRun reports the moves and steps the migration would take and
	// writes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Abort ends the migration that runs: its record and its placements
	// are deleted, and the partitions it moved go back to their owners
	// under the fleet's algorithm as planned moves.
	Abort bool `json:"abort,omitempty"`

	// From is the algorithm the spec records.
	From ring.Algorithm `json:"from"`
	// Moves is the number of partitions whose owner the migration still
	// has to change; Placed the number it has placed on their owners
	// under Target so far.
	Moves  int `json:"moves_left"`
	Placed int `json:"moves_placed"`
	// Steps is, for a dry run, the number of steps Moves take at Budget;
	// otherwise the number of steps this call took.
	Steps int `json:"steps"`
	// Done reports that the spec records Target (and, for an abort, that
	// the migration's placements are gone).
	Done bool `json:"done"`
	// Actor and Reason are who started the migration and why; Started
	// when (the operator's clock).
	Actor   string    `json:"actor,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Revision is the etcd revision of the fleet the report was read at.
	Revision int64 `json:"revision"`
}

// MigrateAlgorithm moves the fleet to the ring algorithm m.Target while it
// serves, as planned moves in bounded steps, and returns when the spec
// records it (or, with m.Abort, when the migration is gone; with
// m.DryRun, at once, with the moves and steps it would take).
//
// It records the migration in etcd (<prefix>migration; the balancer writes
// no move while it stands), then repeats a step: it computes every
// partition's owner under the target algorithm (the members not drained,
// with the placements other than its own) and, in one transaction guarded
// by the spec, the migration's record, the placements and the target
// members as it read them, places at most m.Budget of the partitions
// whose owner differs on their target owners (placements of origin
// "migration"), then waits until their claims have moved. A partition an
// operator pinned is left where the pin puts it. Once every partition is
// at its target owner, one transaction, guarded by the spec, the record,
// and the members, drain marks and placements as read, sets the spec's
// algorithm and deletes the record: every reader then computes the same
// owners by the new algorithm, so the change of algorithm itself moves
// nothing. The migration's placements, which now agree with the ring, are
// deleted afterwards. Every action is audited; a migration interrupted at
// any point resumes when MigrateAlgorithm runs again with the same target.
//
// It needs the "algorithm_migration" protocol feature, and
// "weighted_ring" for the weighted target: every live member must
// understand them, and the spec records them in use (see
// ring.ErrFeatureUnsupported).
//
// Errors wrap ErrInvalidConfig (no actor or reason, an invalid target or
// budget, or another migration that runs), ErrNotFound (an abort with no
// migration), ring.ErrFeatureUnsupported, ErrNoSpec, or the etcd or
// context error.
func (o *Operator) MigrateAlgorithm(ctx context.Context, m Migration, a Action) (Migration, error) {
	if err := a.check(true); err != nil {
		return Migration{}, err
	}
	if m.Abort {
		return o.abortMigration(ctx, a)
	}
	if m.Target != ring.AlgorithmBounded && m.Target != ring.AlgorithmWeighted {
		return Migration{}, fmt.Errorf("%w: target ring algorithm %v", ErrInvalidConfig, m.Target)
	}
	if m.Budget < 0 || m.Budget > maxStepMoves {
		return Migration{}, fmt.Errorf("%w: budget %d not in [0, %d]", ErrInvalidConfig, m.Budget, maxStepMoves)
	}
	v, err := o.view(ctx)
	if err != nil {
		return Migration{}, err
	}
	if m.Budget == 0 {
		m.Budget = min(maxStepMoves, max(1, v.stored.Spec.Partitions/100))
	}
	if v.migration != nil && ring.Algorithm(v.migration.Target) != m.Target {
		return Migration{}, fmt.Errorf("%w: a migration to %v runs (abort it first)", ErrInvalidConfig, ring.Algorithm(v.migration.Target))
	}
	if rs := v.stored.Resize; rs != nil {
		return Migration{}, fmt.Errorf("%w: resize %s of the partition count, %d -> %d, is in progress (finish or abort it first)",
			ErrResizeInProgress, rs.ID, rs.From, rs.To)
	}
	if m.DryRun {
		return v.dryRun(m)
	}
	if v.migration == nil && v.stored.Spec.RingAlgorithm == m.Target {
		return o.cleanup(ctx, m, a)
	}
	if _, err := fleetview.RequireFeature(ctx, o.kv, o.layout, fleetview.FeatureAlgorithmMigration); err != nil {
		return Migration{}, fmt.Errorf("fleet: migrate to the %v ring: %w", m.Target, err)
	}
	if m.Target == ring.AlgorithmWeighted {
		if _, err := fleetview.RequireFeature(ctx, o.kv, o.layout, fleetview.FeatureWeightedRing); err != nil {
			return Migration{}, fmt.Errorf("fleet: migrate to the %v ring: %w", m.Target, err)
		}
	}
	if err := o.startMigration(ctx, m, a); err != nil {
		return Migration{}, err
	}
	return o.runMigration(ctx, m, a)
}

// dryRun reports the moves and steps of a migration to m.Target from v.
func (v *view) dryRun(m Migration) (Migration, error) {
	pl, err := v.planMigration(m.Target)
	if err != nil {
		return Migration{}, err
	}
	m.From, m.Revision = v.stored.Spec.RingAlgorithm, v.rev
	m.Moves, m.Placed = len(pl.writes), pl.placed
	m.Steps = (m.Moves + m.Budget - 1) / m.Budget
	m.Done = v.stored.Spec.RingAlgorithm == m.Target && v.migration == nil
	return m, nil
}

// startMigration writes the migration's record, with its audit record,
// unless one to m.Target stands.
func (o *Operator) startMigration(ctx context.Context, m Migration, a Action) error {
	for {
		v, err := o.view(ctx)
		if err != nil {
			return err
		}
		if v.migration != nil {
			if ring.Algorithm(v.migration.Target) != m.Target {
				return fmt.Errorf("%w: a migration to %v runs (abort it first)", ErrInvalidConfig, ring.Algorithm(v.migration.Target))
			}
			o.log.Info("migration resumed", "from", v.stored.Spec.RingAlgorithm, "to", m.Target, "started_by", v.migration.Actor)
			return nil
		}
		rec, ak := o.newRecord(a, actionMigrate, migrationTarget)
		val := keys.EncodeJSON(keys.MigrationRecord{Target: int(m.Target), Budget: m.Budget, Actor: a.Actor, Reason: a.Reason, Time: rec.Time})
		mk := o.layout.Migration()
		resp, err := o.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(mk), "=", 0),
				clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.stored.ModRev)).
			Then(clientv3.OpPut(mk, val), clientv3.OpPut(ak, encodeRecord(rec))).
			Commit()
		if err != nil {
			return fmt.Errorf("fleet: start the migration to the %v ring: %w", m.Target, err)
		}
		if resp.Succeeded {
			o.log.Info("migration started", "from", v.stored.Spec.RingAlgorithm, "to", m.Target, "budget", m.Budget, "revision", resp.Header.Revision)
			return nil
		}
	}
}

// runMigration takes the steps of the migration to m.Target until the
// spec records it.
func (o *Operator) runMigration(ctx context.Context, m Migration, a Action) (Migration, error) {
	steps := 0
	for {
		v, err := o.view(ctx)
		if err != nil {
			return Migration{}, err
		}
		if v.migration == nil { // flipped (by this call or another) or aborted
			if v.stored.Spec.RingAlgorithm != m.Target {
				return Migration{}, fmt.Errorf("%w: the migration to %v was aborted", ErrNotFound, m.Target)
			}
			done, err := o.cleanup(ctx, m, a)
			done.Steps = steps
			return done, err
		}
		pl, err := v.planMigration(m.Target)
		if err != nil {
			return Migration{}, err
		}
		switch {
		case len(pl.writes) > 0 || len(pl.deletes) > 0:
			if len(pl.pending) > 0 { // the last step's moves are under way
				break
			}
			applied, err := o.step(ctx, v, pl, m, a)
			if err != nil {
				return Migration{}, err
			}
			if applied {
				steps++
			}
			continue
		case len(pl.pending) == 0:
			if err := o.flip(ctx, v, m, a); err != nil {
				return Migration{}, err
			}
			continue
		}
		if !clock.Sleep(ctx, o.clock, settleEvery) {
			return Migration{}, ctx.Err()
		}
	}
}

// step places at most m.Budget of pl's partitions on their target owners
// and deletes the migration's placements that are no longer needed, in
// one transaction guarded by what v read. A step refused because the
// fleet changed since v is not applied; the caller plans it again.
func (o *Operator) step(ctx context.Context, v *view, pl migrationPlan, m Migration, a Action) (bool, error) {
	budget := m.Budget
	rec, ak := o.newRecord(a, actionStep, migrationTarget)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.stored.ModRev),
		clientv3.Compare(clientv3.ModRevision(o.layout.Migration()), "=", v.migrationRev),
	}
	var ops []clientv3.Op
	for _, p := range pl.deletes {
		if len(rec.Partitions) == budget {
			break
		}
		k := o.layout.Placement(p)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", v.fleet.Placements[p].ModRev))
		ops = append(ops, clientv3.OpDelete(k))
		rec.Partitions = append(rec.Partitions, p)
	}
	now := rec.Time.UnixMilli()
	for _, w := range pl.writes {
		if len(rec.Partitions) == budget {
			break
		}
		k := o.layout.Placement(w.Partition)
		member := v.fleet.Members[w.Node]
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", v.fleet.Placements[w.Partition].ModRev),
			clientv3.Compare(clientv3.LeaseValue(o.layout.Member(w.Node)), "=", member.Lease))
		ops = append(ops, clientv3.OpPut(k, keys.EncodePlacement(keys.Placement{Node: w.Node, Origin: keys.OriginMigration, Rev: v.rev, Time: now,
			By: a.Actor, Reason: a.Reason})))
		rec.Partitions = append(rec.Partitions, w.Partition)
	}
	rec.Reason = fmt.Sprintf("%s (to the %v ring: %d of %d moves left)", a.Reason, m.Target, len(pl.writes)+len(pl.deletes), len(pl.writes)+pl.placed)
	ops = append(ops, clientv3.OpPut(ak, encodeRecord(rec)))
	resp, err := o.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("fleet: migration step: %w", err)
	}
	if resp.Succeeded {
		o.log.Info("migration step", "to", m.Target, "moves", len(rec.Partitions), "left", len(pl.writes)+len(pl.deletes)-len(rec.Partitions),
			"placed", pl.placed, "revision", resp.Header.Revision)
	}
	return resp.Succeeded, nil
}

// flip sets the spec's algorithm to m.Target and deletes the migration's
// record, in one transaction guarded by the spec, the record, and the
// members, drain marks and placements as v read them: the owners that
// every reader computes are the same before and after it.
func (o *Operator) flip(ctx context.Context, v *view, m Migration, a Action) error {
	spec := v.stored
	spec.RingAlgorithm = m.Target
	spec.Requires = slices.DeleteFunc(slices.Clone(spec.Requires), func(f string) bool {
		return f == fleetview.FeatureWeightedRing && m.Target != ring.AlgorithmWeighted
	})
	val, err := fleetview.EncodeStored(spec)
	if err != nil {
		return err
	}
	rec, ak := o.newRecord(a, actionFlip, migrationTarget)
	next := v.rev + 1
	resp, err := o.kv.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(o.layout.Spec()), "=", v.stored.ModRev),
		clientv3.Compare(clientv3.ModRevision(o.layout.Migration()), "=", v.migrationRev),
		clientv3.Compare(clientv3.ModRevision(o.layout.Members()), "<", next).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(o.layout.DrainedPrefix()), "<", next).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(o.layout.Placements()), "<", next).WithPrefix(),
	).Then(
		clientv3.OpPut(o.layout.Spec(), string(val)),
		clientv3.OpDelete(o.layout.Migration()),
		clientv3.OpPut(ak, encodeRecord(rec)),
	).Commit()
	if err != nil {
		return fmt.Errorf("fleet: set the spec's ring algorithm to %v: %w", m.Target, err)
	}
	if resp.Succeeded {
		o.log.Info("migration flipped", "from", v.stored.Spec.RingAlgorithm, "to", m.Target, "revision", resp.Header.Revision)
	}
	return nil
}
