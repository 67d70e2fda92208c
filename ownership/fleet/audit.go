package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/leaderkey"
	"github.com/tenure-go/tenure/ownership/ring"
)

// The actions an AuditRecord records.
const (
	actionForceRelease = "force-release"
	actionDrain        = "drain"
	actionUndrain      = "undrain"
)

// AuditRecord is one operator action, stored as JSON at
// <prefix>audit/<id> in the same transaction as the action itself. Ids sort
// by the time of the action (19-digit Unix nanoseconds, '-', a random
// suffix); Audit returns records in the order etcd committed them.
type AuditRecord struct {
	// ID is the record's key under <prefix>audit/. Filled by readers.
	ID string `json:"id,omitempty"`
	// Revision is the etcd revision of the action: the revision at which the
	// claim or leader key was deleted, or the drain mark written. Filled by
	// readers and by the action's own result.
	Revision int64 `json:"revision,omitempty"`
	// Actor is who acted, Action what ("force-release", "drain",
	// "undrain", "pin", "unpin", "balance-suspend", "balance-resume", or a
	// ring-algorithm migration's "algorithm-migrate", "algorithm-step",
	// "algorithm-flip", "algorithm-cleanup" or "algorithm-abort"), Target on what, Reason why, Time when (the
	// operator's clock). A force release's, pin's or unpin's Target is the
	// fence scope of what it released (fence.PartitionScope or
	// fence.LeaderScope); a drain's or undrain's is "node/<id>"; a
	// suspension's or resumption's is "balancer"; a migration's is
	// "spec/ring_algorithm".
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
	// Holder is the node (a partition's claim) or candidate (a leader
	// key) that held the target when the action was taken: the one a force
	// release released, or the one that served the partition when it was
	// pinned or unpinned; empty if nobody held it.
	Holder string `json:"holder,omitempty"`
	// Node is the node a pin places the partition on, or the one an
	// unpin's pin placed it on; empty for the other actions.
	Node string `json:"node,omitempty"`
	// Partitions are the partitions a step of a ring-algorithm migration
	// placed (or an abort released); empty for the other actions.
	Partitions []int `json:"step_partitions,omitempty"`
	// OldEpoch is the epoch released (force release only).
	OldEpoch int64 `json:"old_epoch,omitempty"`
	// NewEpoch is the epoch of the claim or leader key that holds the target
	// now, if it was created after the release; filled by Audit, 0 if
	// nothing holds it yet.
	NewEpoch int64 `json:"new_epoch,omitempty"`
}

// Action says who takes an operator action and why.
type Action struct {
	// Actor names who acts, such as "alice@ops-host". Required.
	Actor string
	// Reason says why. Required for force release and drain.
	Reason string
	// Epoch, for a force release, is the epoch to release: the release
	// happens only if the holder's epoch is still this one. Zero means the
	// epoch read just before the release, which the release is then guarded
	// by in the same way.
	Epoch int64
}

func (a Action) check(needReason bool) error {
	switch {
	case strings.TrimSpace(a.Actor) == "":
		return fmt.Errorf("%w: an operator action needs an actor", ErrInvalidConfig)
	case needReason && strings.TrimSpace(a.Reason) == "":
		return fmt.Errorf("%w: an operator action needs a reason", ErrInvalidConfig)
	case a.Epoch < 0:
		return fmt.Errorf("%w: negative epoch %d", ErrInvalidConfig, a.Epoch)
	}
	return nil
}

// nodeTarget returns the AuditRecord target of a drain: "node/<id>".
func nodeTarget(id string) string { return "node/" + id }

// auditSuffix returns 8 random hex digits.
func auditSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

func encodeRecord(r AuditRecord) string {
	b, _ := json.Marshal(r) // cannot fail: strings, ints and a time
	return string(b)
}

// newRecord returns the record of an action on target, stamped now.
func (o *Operator) newRecord(a Action, action, target string) (AuditRecord, string) {
	r := AuditRecord{Actor: a.Actor, Action: action, Target: target, Reason: a.Reason, Time: o.clock.Now().UTC()}
	r.ID = keys.AuditID(r.Time, auditSuffix())
	return r, o.layout.Audit(r.ID)
}

// ForceRelease ends the tenure that holds scope, the fence scope of a
// partition (fence.PartitionScope) or of an election (fence.LeaderScope),
// and records the action, in one transaction guarded by the holder's epoch
// (a.Epoch, or the one read first if zero), so that it never releases a
// newer holder.
//
// For a partition it deletes the partition's claim: the holder sees the
// delete, ends its tenure (its partition context is cancelled, OnReleased
// fires with ErrLost), and the ring's owner claims the partition again
// at a higher epoch, advancing its fencers past the old holder's token.
// For an election it deletes the leader key of the election (under
// <prefix>leader/<name>/, the first created of its candidates): the leader's
// term ends, and the next term has a higher epoch and advances the
// election's fencers past the old one.
//
// Errors wrap ErrInvalidConfig (no actor or reason, or a scope that names
// neither), ErrInvalidPartition, ErrNotFound (nothing holds it, or a
// holder at another epoch than a.Epoch does: the message names its epoch)
// or the etcd error.
func (o *Operator) ForceRelease(ctx context.Context, scope string, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	if name, ok := strings.CutPrefix(scope, "leader/"); ok {
		return o.forceReleaseLeader(ctx, name, a)
	}
	digits, ok := strings.CutPrefix(scope, "p/")
	if !ok {
		return AuditRecord{}, fmt.Errorf("%w: scope %q names neither a partition (fence.PartitionScope) nor an election (fence.LeaderScope)", ErrInvalidConfig, scope)
	}
	p, err := strconv.Atoi(digits)
	if err != nil || fence.PartitionScope(p) != scope {
		return AuditRecord{}, fmt.Errorf("%w: scope %q", ErrInvalidPartition, scope)
	}
	if err := o.checkPartition(ctx, p); err != nil {
		return AuditRecord{}, err
	}
	k := o.layout.Claim(p)
	target := fence.PartitionScope(p)
	resp, err := o.kv.Get(ctx, k)
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: force release %s: %w", target, err)
	}
	var cur *held
	if len(resp.Kvs) > 0 {
		kv := resp.Kvs[0]
		cur = &held{key: string(kv.Key), epoch: keys.ClaimEpoch(kv), claim: true, holder: keys.DecodeClaim(kv.Value).Node}
	}
	return o.release(ctx, a, target, k, cur)
}

// forceReleaseLeader is ForceRelease of the election name, whose action
// a has been checked.
func (o *Operator) forceReleaseLeader(ctx context.Context, name string, a Action) (AuditRecord, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return AuditRecord{}, fmt.Errorf("%w: election name %q", ErrInvalidConfig, name)
	}
	target := fence.LeaderScope(name)
	byName, err := leaderkey.ReadAll(ctx, o.kv, o.layout.Leaders())
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: force release %s: %w", target, err)
	}
	var cur *held
	if cs := byName[name]; len(cs) > 0 {
		cur = &held{key: cs[0].Key, epoch: cs[0].Epoch, holder: cs[0].ID}
	}
	return o.release(ctx, a, target, o.layout.Leader(name), cur)
}

// held is the key that holds a force release's target: a claim or a
// leader key, with its epoch (CreateRevision) and holder.
type held struct {
	key    string
	epoch  int64
	holder string
	claim  bool // a claim key (epoch keys.ClaimEpoch), else a leader key (epoch its CreateRevision)
}

// release deletes cur (the key that holds target, nil if none) if its
// epoch is still the one to release, and writes the audit record in the
// same transaction. For an error, lookedUp names what was looked up.
func (o *Operator) release(ctx context.Context, a Action, target, lookedUp string, cur *held) (AuditRecord, error) {
	epoch := a.Epoch
	switch {
	case cur == nil && epoch == 0:
		return AuditRecord{}, fmt.Errorf("fleet: force release %s: %w: nothing holds it (no key at %s)", target, ErrNotFound, lookedUp)
	case cur == nil:
		return AuditRecord{}, fmt.Errorf("fleet: force release %s at epoch %d: %w: nothing holds it (no key at %s)", target, epoch, ErrNotFound, lookedUp)
	case epoch == 0:
		epoch = cur.epoch
	case epoch != cur.epoch:
		return AuditRecord{}, fmt.Errorf("fleet: force release %s at epoch %d: %w: the tenure ended; held at epoch %d", target, epoch, ErrNotFound, cur.epoch)
	}
	rec, ak := o.newRecord(a, actionForceRelease, target)
	rec.Holder, rec.OldEpoch = cur.holder, epoch
	k := cur.key
	resp, err := o.kv.Txn(ctx).
		If(cur.standsAt(epoch)).
		Then(clientv3.OpDelete(k), clientv3.OpPut(ak, encodeRecord(rec))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: force release %s: %w", target, err)
	}
	if !resp.Succeeded {
		var now int64
		if len(resp.Responses) > 0 {
			if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
				now = cur.epochOf(rr.Kvs[0])
			}
		}
		if now == 0 {
			return AuditRecord{}, fmt.Errorf("fleet: force release %s at epoch %d: %w: nothing holds it (released meanwhile)", target, epoch, ErrNotFound)
		}
		return AuditRecord{}, fmt.Errorf("fleet: force release %s at epoch %d: %w: the tenure ended; held at epoch %d", target, epoch, ErrNotFound, now)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// Drain marks node id drained and records the action, in one transaction:
// every node and client then computes the ring without it, and its
// partitions hand off as in a planned move. The node stays a member (alive,
// serving nothing) until Undrain; the mark outlives the node's sessions.
// Draining a drained node replaces its mark.
//
// Errors wrap ErrInvalidConfig (no actor or reason),
// ring.ErrInvalidNodeID, ErrNotFound (id is not a member) or the etcd
// error.
func (o *Operator) Drain(ctx context.Context, id string, a Action) (AuditRecord, error) {
	if err := a.check(true); err != nil {
		return AuditRecord{}, err
	}
	if err := ring.ValidateNodeID(id); err != nil {
		return AuditRecord{}, err
	}
	rec, ak := o.newRecord(a, actionDrain, nodeTarget(id))
	mark, _ := json.Marshal(Mark{Actor: rec.Actor, Reason: rec.Reason, Time: rec.Time}) // cannot fail
	mk := o.layout.Member(id)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mk), ">", 0)).
		Then(clientv3.OpPut(o.layout.Drained(id), string(mark)), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: drain %s: %w", id, err)
	}
	if !resp.Succeeded {
		return AuditRecord{}, fmt.Errorf("fleet: drain %s: %w: not a member", id, ErrNotFound)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// Undrain deletes node id's drain mark and records the action, in one
// transaction: the ring includes the node again (if it is a member) and it
// claims its partitions back. a.Reason is optional.
//
// Errors wrap ErrInvalidConfig (no actor), ring.ErrInvalidNodeID,
// ErrNotFound (the node is not drained) or the etcd error.
func (o *Operator) Undrain(ctx context.Context, id string, a Action) (AuditRecord, error) {
	if err := a.check(false); err != nil {
		return AuditRecord{}, err
	}
	if err := ring.ValidateNodeID(id); err != nil {
		return AuditRecord{}, err
	}
	rec, ak := o.newRecord(a, actionUndrain, nodeTarget(id))
	dk := o.layout.Drained(id)
	resp, err := o.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(dk), ">", 0)).
		Then(clientv3.OpDelete(dk), clientv3.OpPut(ak, encodeRecord(rec))).
		Commit()
	if err != nil {
		return AuditRecord{}, fmt.Errorf("fleet: undrain %s: %w", id, err)
	}
	if !resp.Succeeded {
		return AuditRecord{}, fmt.Errorf("fleet: undrain %s: %w: the node is not drained", id, ErrNotFound)
	}
	rec.Revision = resp.Header.Revision
	return rec, nil
}

// Audit reads the audit records of the actions taken at or after since
// (the zero time: all), in the order etcd committed them. It fills each
// force release's NewEpoch from the claim or leader key that holds its
// target now (leaders read from the candidates' keys just before the
// records), if that was created after the release. A record that cannot
// be decoded is returned with only ID, Revision and Reason (saying so) set.
// A pin or unpin record whose Node is empty keeps the pin's node in Holder;
// Audit returns it as Node, with Holder empty (unknown). The result is
// never nil.
func (o *Operator) Audit(ctx context.Context, since time.Time) ([]AuditRecord, error) {
	leaders, err := leaderkey.ReadAll(ctx, o.kv, o.layout.Leaders())
	if err != nil {
		return nil, fmt.Errorf("fleet: read the audit records: %w", err)
	}
	resp, err := o.kv.Txn(ctx).Then(
		clientv3.OpGet(o.layout.Audits(), clientv3.WithPrefix()),
		clientv3.OpGet(o.layout.Claims(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("fleet: read the audit records: %w", err)
	}
	if len(resp.Responses) != 2 {
		return nil, fmt.Errorf("fleet: read the audit records: %d responses for 2 reads", len(resp.Responses))
	}
	holders := make(map[string]int64) // target -> epoch of its holder now
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if p, ok := o.layout.ClaimPartition(string(kv.Key)); ok {
			holders[fence.PartitionScope(p)] = keys.ClaimEpoch(kv)
		}
	}
	for name, cs := range leaders {
		holders[fence.LeaderScope(name)] = cs[0].Epoch
	}
	out := []AuditRecord{}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		var r AuditRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			r = AuditRecord{Reason: "undecodable audit record: " + err.Error()}
		} else if r.Time.Before(since) {
			continue
		}
		r.ID = strings.TrimPrefix(string(kv.Key), o.layout.Audits())
		r.Revision = kv.CreateRevision
		if e := holders[r.Target]; r.Action == actionForceRelease && e > r.Revision {
			r.NewEpoch = e
		}
		if (r.Action == actionPin || r.Action == actionUnpin) && r.Node == "" {
			r.Node, r.Holder = r.Holder, ""
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b AuditRecord) int { return cmp.Compare(a.Revision, b.Revision) })
	return out, nil
}

// standsAt returns the comparison that holds iff h's key stands at epoch.
func (h *held) standsAt(epoch int64) clientv3.Cmp {
	if h.claim {
		return keys.ClaimAt(h.key, epoch)
	}
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", epoch)
}

// epochOf returns the epoch of kv, a version of h's key.
func (h *held) epochOf(kv *mvccpb.KeyValue) int64 {
	if h.claim {
		return keys.ClaimEpoch(kv)
	}
	return kv.CreateRevision
}
