package fleet

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// The placement actions an AuditRecord records. actionPin is also the
// origin of a pin in a placement (PartitionStatus.Placed,
// PlacementStatus.Origin), as placement keys in etcd record it.
const (
	actionPin   = "pin"
	actionUnpin = "unpin"
)

// placementMove is the origin of a balancer's move in a placement
// (PartitionStatus.Placed, PlacementStatus.Origin), as placement keys in
// etcd record it.
const placementMove = "balance"

// Pin places partition p on node and records the action, in one
// transaction: every node and client then names node as p's owner while it
// is a member and not drained (and the ring's owner otherwise), and p moves
// there as in a planned move (drain, release, claim at a new epoch, fencers
// raised). A pin replaces a balancer's move of p and an earlier pin. node
// must be a member when it is pinned, so that a typo is refused; a pin
// outlives the node's sessions. Reason is required. The record names the
// pin's node (Node) and the node that held p's claim when it was pinned
// (Holder).
//
// A pin needs the "placements" protocol feature: every live member must
// understand it, and the spec records it in use (see ring.ErrFeatureUnsupported).
//
// Errors wrap ErrInvalidConfig (no actor or reason), ErrInvalidPartition,
// ring.ErrInvalidNodeID, ring.ErrFeatureUnsupported (naming the members whose builds lack placements), ErrNotFound (node is
// not a member) or the etcd error.
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
	if _, err := fleetview.RequireFeature(ctx, o.kv, o.layout, fleetview.FeaturePlacements); err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w", p, node, err)
	}
	rec, ak := o.newRecord(a, actionPin, fence.PartitionScope(p))
	rec.Node = node
	val := keys.EncodePlacement(keys.Placement{Node: node, Origin: keys.OriginPin, By: a.Actor, Reason: a.Reason, Time: rec.Time.UnixMilli()})
	mk := o.layout.Member(node)
	for {
		c, err := o.readClaim(ctx, p, 0)
		if err != nil {
			return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w", p, node, err)
		}
		rec.Holder = c.holder
		resp, err := o.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(mk), ">", 0), c.unchanged()).
			Then(clientv3.OpPut(o.layout.Placement(p), val), clientv3.OpPut(ak, encodeRecord(rec))).
			Else(clientv3.OpGet(mk, clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w", p, node, err)
		}
		if resp.Succeeded {
			rec.Revision = resp.Header.Revision
			return rec, nil
		}
		if len(resp.Responses) == 0 || len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			return AuditRecord{}, fmt.Errorf("fleet: pin partition %d to %s: %w: not a member", p, node, ErrNotFound)
		}
		// p's claim changed since it was read: read its holder again.
	}
}

// Unpin deletes partition p's pin and records the action, in one
// transaction guarded by the pin's revision, so that it never deletes a
// placement written meanwhile: the ring decides p again. Reason is
// required. The record names the pin's node (Node) and the node that held
// p's claim when it was unpinned (Holder).
//
// Errors wrap ErrInvalidConfig (no actor or reason), ErrInvalidPartition,
// ErrNotFound (no pin on p, or it changed meanwhile) or the etcd error.
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
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w: no pin", p, ErrNotFound)
	}
	pl, err := keys.DecodePlacement(cur.Kvs[0].Value)
	if err == nil && pl.Origin != keys.OriginPin {
		return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w: no pin (a balancer's move to %s)", p, ErrNotFound, pl.Node)
	}
	pinned := clientv3.Compare(clientv3.ModRevision(k), "=", cur.Kvs[0].ModRevision)
	rec, ak := o.newRecord(a, actionUnpin, fence.PartitionScope(p))
	rec.Node = pl.Node
	for rev := cur.Header.Revision; ; rev = 0 {
		c, err := o.readClaim(ctx, p, rev)
		if err != nil {
			return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w", p, err)
		}
		rec.Holder = c.holder
		resp, err := o.kv.Txn(ctx).
			If(pinned, c.unchanged()).
			Then(clientv3.OpDelete(k), clientv3.OpPut(ak, encodeRecord(rec))).
			Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w", p, err)
		}
		if resp.Succeeded {
			rec.Revision = resp.Header.Revision
			return rec, nil
		}
		if len(resp.Responses) == 0 || !sameRevision(resp.Responses[0].GetResponseRange().GetKvs(), cur.Kvs[0].ModRevision) {
			return AuditRecord{}, fmt.Errorf("fleet: unpin partition %d: %w: no pin (it changed meanwhile)", p, ErrNotFound)
		}
		// p's claim changed since it was read: read its holder again.
	}
}

// claimRead is partition p's claim as read at one revision: its holder
// ("" if unclaimed) and the claim key's ModRevision (0 if absent).
type claimRead struct {
	key    string
	holder string
	modRev int64
}

// readClaim reads partition p's claim at revision rev (0: the latest).
func (o *Operator) readClaim(ctx context.Context, p int, rev int64) (claimRead, error) {
	c := claimRead{key: o.layout.Claim(p)}
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := o.kv.Get(ctx, c.key, opts...)
	if err != nil {
		return claimRead{}, err
	}
	if len(resp.Kvs) > 0 {
		c.holder, c.modRev = keys.DecodeClaim(resp.Kvs[0].Value).Node, resp.Kvs[0].ModRevision
	}
	return c, nil
}

// unchanged is the comparison that holds while the claim is as c read it.
func (c claimRead) unchanged() clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(c.key), "=", c.modRev)
}

// sameRevision reports whether kvs holds one key of ModRevision rev.
func sameRevision(kvs []*mvccpb.KeyValue, rev int64) bool {
	return len(kvs) == 1 && kvs[0].ModRevision == rev
}

// checkPartition returns an error wrapping ErrInvalidPartition if p is not
// in [0, P) of the fleet's spec.
func (o *Operator) checkPartition(ctx context.Context, p int) error {
	spec, err := ReadSpec(ctx, o.kv, o.layout.Prefix())
	if err != nil {
		return err
	}
	if p < 0 || p >= spec.Partitions {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidPartition, p, spec.Partitions)
	}
	return nil
}
