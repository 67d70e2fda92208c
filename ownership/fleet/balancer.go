package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
)

// The balancer actions an AuditRecord records; their Target is
// "balancer".
const (
	actionSuspendBalancer = "balance-suspend"
	actionResumeBalancer  = "balance-resume"
)

// balancerTarget is the AuditRecord target of the balancer actions.
const balancerTarget = "balancer"

// BalancerPass is the balancer's last applied pass, as it recorded it in
// the pass's own transaction.
type BalancerPass struct {
	// Revision is the etcd revision the pass was applied at; Snapshot the
	// revision of the snapshot it was computed from; Term the epoch of
	// the balancer's term; Time when it applied it, by its clock.
	Revision int64     `json:"revision"`
	Snapshot int64     `json:"snapshot_revision"`
	Term     int64     `json:"term"`
	Time     time.Time `json:"time"`
	// Moves are the partitions it moved; Removed the partitions whose
	// balancer's moves it removed (their node was gone or drained, or the
	// ring agreed). Neither is nil.
	Moves   []BalancerMove `json:"moves"`
	Removed []int          `json:"removals"`
	// Before and After are the load imbalance before the pass and as the
	// pass expected it after its moves.
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	// Upper, Lower, Budget and Cooldown are the configuration the
	// balancer planned it by (balance.Config).
	Upper    float64 `json:"upper"`
	Lower    float64 `json:"lower"`
	Budget   float64 `json:"budget"`
	Cooldown Seconds `json:"cooldown_seconds"`
}

// BalancerMove is one partition a balancer pass moved.
type BalancerMove struct {
	Partition int     `json:"partition"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Load      float64 `json:"load"`
}

// BalancerState is the balancer's state in etcd.
type BalancerState struct {
	// Suspended is the operator's suspension of the balancer that stands,
	// nil if none: while it stands, whichever node runs the balancer plans
	// its passes and reports them (metrics, logs) but writes no move.
	Suspended *Mark `json:"suspended,omitempty"`
	// LastPass is the last pass a balancer applied, nil if none.
	LastPass *BalancerPass `json:"last_pass,omitempty"`
}

// SuspendBalancer suspends the fleet's balancer and records the action, in
// one transaction: the suspension is stored in etcd, so that whichever
// node runs the balancer, now or after a failover, writes no move while it
// stands (a pass planned before it and applied after is refused by etcd).
// Suspending a suspended balancer replaces the suspension. Reason is
// required.
//
// Errors wrap ErrInvalidConfig (no actor or reason) or the etcd error.
func (o *Operator) SuspendBalancer(ctx context.Context, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	rec, ak := o.newRecord(a, actionSuspendBalancer, balancerTarget)
	val := keys.EncodeJSON(keys.BalanceSuspend{Actor: rec.Actor, Reason: rec.Reason, Time: rec.Time})
	resp, err := o.kv.Txn(ctx).Then(clientv3.OpPut(o.layout.BalanceSuspended(), val), clientv3.OpPut(ak, encodeRecord(rec))).Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: suspend the balancer: %w", err)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// ResumeBalancer deletes the balancer's suspension and records the action,
// in one transaction: the balancer's next pass may move partitions again.
// Reason is required.
//
// Errors wrap ErrInvalidConfig (no actor or reason), ErrNotFound (the
// balancer is not suspended) or the etcd error.
func (o *Operator) ResumeBalancer(ctx context.Context, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	rec, ak := o.newRecord(a, actionResumeBalancer, balancerTarget)
	k := o.layout.BalanceSuspended()
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpDelete(k), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: resume the balancer: %w", err)
	}
	if !resp.Succeeded {
		return AuditRecord{}, fmt.Errorf("fleet: resume the balancer: %w: the balancer is not suspended", ErrNotFound)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// balancerAt reads the balancer's state at revision rev (0: the latest).
// A value that cannot be decoded is a suspension that says so (a mark
// that stands still suspends) or no last pass.
func (o *Operator) balancerAt(ctx context.Context, rev int64) (BalancerState, error) {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := o.kv.Txn(ctx).Then(
		clientv3.OpGet(o.layout.BalanceSuspended(), opts...),
		clientv3.OpGet(o.layout.BalancePass(), opts...),
	).Commit()
	if err != nil {
		return BalancerState{}, fmt.Errorf("fleet: read the balancer's state: %w", err)
	}
	var st BalancerState
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		sus := Mark(keys.DecodeBalanceSuspend(kvs[0].Value))
		st.Suspended = &sus
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		var r keys.BalancePassRecord
		if json.Unmarshal(kvs[0].Value, &r) == nil {
			st.LastPass = passOf(r, kvs[0].ModRevision)
		}
	}
	return st, nil
}

func passOf(r keys.BalancePassRecord, rev int64) *BalancerPass {
	p := &BalancerPass{Revision: rev, Snapshot: r.Rev, Term: r.Term, Time: r.Time, Moves: make([]BalancerMove, len(r.Moves)), Removed: append([]int{}, r.Removed...),
		Before: r.Before, After: r.After, Upper: r.Upper, Lower: r.Lower, Budget: r.Budget, Cooldown: Seconds(r.Cooldown)}
	for i, m := range r.Moves {
		p.Moves[i] = BalancerMove(m)
	}
	return p
}
