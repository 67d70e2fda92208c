package fleet

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ring"
)

// The origins of a placement (PartitionStatus.Placed, Placement.Origin),
// as placement keys in etcd record them.
const (
	// PlacementPin is an operator's pin (Operator.Pin).
	PlacementPin = "pin"
	// PlacementMove is a balancer's move.
	PlacementMove = "balance"
)

// The placement actions an AuditRecord records.
const (
	ActionPin   = "pin"
	ActionUnpin = "unpin"
)

// Pin places partition p on node and records the action, in one
// transaction: every node and client then names node as p's owner while it
// is a member and not drained (and the ring's owner otherwise), and p moves
// there as in a planned move (drain, release, claim at a new epoch, fencers
// raised). A pin replaces a balancer's move of p and an earlier pin. node
// must be a member when it is pinned, so that a typo is refused; a pin
// outlives the node's sessions. Reason is required.
//
// Errors wrap ErrNoActor, ErrNoReason, ErrInvalidPartition,
// ring.ErrInvalidNodeID, ErrNotMember or the etcd error.
func (o *Operator) Pin(ctx context.Context, p int, node string, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	if err := ring.ValidateNodeID(node); err != nil {
		return AuditRecord{}, err
	}
	if err := o.checkPartition(ctx, p); err != nil {
		return AuditRecord{}, err
	}
	rec, ak := o.newRecord(a, ActionPin, fence.PartitionScope(p))
	rec.Holder = node
	val := keys.EncodePlacement(keys.Placement{Node: node, Origin: keys.OriginPin, By: a.Actor, Reason: a.Reason})
	mk := o.layout.Member(node)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mk), ">", 0)).
		Then(clientv3.OpPut(o.layout.Placement(p), val), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w", p, node, err)
	}
	if !resp.Succeeded {
		return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w", p, node, ErrNotMember)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// Unpin deletes partition p's pin and records the action, in one
// transaction guarded by the pin's revision, so that it never deletes a
// placement written meanwhile: the ring decides p again. Reason is
// required.
//
// Errors wrap ErrNoActor, ErrNoReason, ErrInvalidPartition, ErrNotPinned
// (no pin on p, or it changed meanwhile) or the etcd error.
func (o *Operator) Unpin(ctx context.Context, p int, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	if err := o.checkPartition(ctx, p); err != nil {
		return AuditRecord{}, err
	}
	k := o.layout.Placement(p)
	cur, err := o.kv.Get(ctx, k)
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w", p, err)
	}
	if len(cur.Kvs) == 0 {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w", p, ErrNotPinned)
	}
	pl, err := keys.DecodePlacement(cur.Kvs[0].Value)
	if err == nil && pl.Origin != keys.OriginPin {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w (a balancer's move to %s)", p, ErrNotPinned, pl.Node)
	}
	rec, ak := o.newRecord(a, ActionUnpin, fence.PartitionScope(p))
	rec.Holder = pl.Node
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", cur.Kvs[0].ModRevision)).
		Then(clientv3.OpDelete(k), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w", p, err)
	}
	if !resp.Succeeded {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w (changed meanwhile)", p, ErrNotPinned)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// checkPartition returns an error wrapping ErrInvalidPartition if p is not
// in [0, P) of the fleet's spec.
func (o *Operator) checkPartition(ctx context.Context, p int) error {
	spec, err := o.Spec(ctx)
	if err != nil {
		return err
	}
	if p < 0 || p >= spec.Partitions {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidPartition, p, spec.Partitions)
	}
	return nil
}
