package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/leaderkey"
	"github.com/tenure-go/tenure/internal/nilness"
)

// OperatorConfig configures an Operator. Cluster (or Prefix) is required.
type OperatorConfig struct {
	// Cluster selects the key prefix "/tenure/<Cluster>/" of the fleet.
	// It must not contain '/' or NUL, as ownership.Config.Cluster.
	Cluster string
	// Prefix, if set, is used instead of the prefix derived from Cluster.
	// It must not contain NUL.
	Prefix string
	// Clock stamps drain marks and audit records, and times the waits of
	// a ring-algorithm migration. Nil means the real clock.
	Clock clockwork.Clock
	// Logger receives one line per step of a ring-algorithm migration
	// (MigrateAlgorithm). Nil means no logging.
	Logger hclog.Logger
	// TracerProvider, if not nil, receives a span for each Resize and
	// each of its steps (see trace.go). Nil means no spans (never the
	// global provider).
	TracerProvider trace.TracerProvider
}

// Validate reports whether c can configure an Operator. Errors wrap
// ErrInvalidConfig.
func (c OperatorConfig) Validate() error {
	if err := keys.CheckFleet(c.Cluster, c.Prefix); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := nilness.TypedNil(nilness.Field{Name: "tracer provider", Value: c.TracerProvider}); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrInvalidConfig, ErrNilArgument, err)
	}
	return nil
}

// Operator lets a person or a tool outside the fleet see and steer it: list
// the spec, members, partitions and leaders, summarize the fleet's health,
// and take the audited actions of the operator protocol (force release,
// drain, undrain, pin, unpin, suspend and resume the balancer). Every listing is read at one etcd revision and decoded
// by the same rules as the nodes' own reader; the ring it reports is the one
// every node computes (members minus drained ones).
//
// Every action is one etcd transaction that also writes its audit record
// (see AuditRecord), so an action is never taken unrecorded. While etcd
// refuses puts for its NOSPACE alarm, an action waits, trying again every
// 0.5s, until the alarm is disarmed or its context ends (an error that
// wraps ErrNoSpace). Force release
// and drain need an actor and a reason.
//
// An Operator holds no lease and starts no goroutine; it needs no Close. It
// is safe for concurrent use by multiple goroutines.
type Operator struct {
	kv     clientv3.KV
	lease  clientv3.Lease // nil if kv is not also a clientv3.Lease
	alarms any            // kv, which Status lists etcd's alarms through (etcderr.Alarms)
	layout keys.Layout
	clock  clockwork.Clock
	log    hclog.Logger
	tp     trace.TracerProvider // nil: no spans
}

// NewOperator returns an Operator of the fleet cfg names, reached through
// kv. If kv also implements clientv3.Lease (a *clientv3.Client does),
// Members reports the time left on each member's lease; if it also
// implements clientv3.Maintenance (a *clientv3.Client does), Status lists
// the alarms that stand in etcd. Errors wrap
// ErrNilArgument or ErrInvalidConfig.
func NewOperator(kv clientv3.KV, cfg OperatorConfig) (*Operator, error) {
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd client", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	o := &Operator{kv: waitingKV{KV: kv, clock: cfg.Clock}, layout: keys.For(cfg.Cluster, cfg.Prefix), clock: cfg.Clock, alarms: kv, log: cfg.Logger, tp: cfg.TracerProvider}
	if l, ok := kv.(clientv3.Lease); ok {
		o.lease = l
	}
	return o, nil
}

// MemberStatus is one member of the fleet as an Operator sees it.
type MemberStatus struct {
	// ID, Addr and Meta are the member's published record.
	ID   string            `json:"id"`
	Addr string            `json:"addr"`
	Meta map[string]string `json:"meta,omitempty"`
	// Lease is the ID of the member's lease (its Session).
	Lease int64 `json:"lease"`
	// Drained reports an operator's drain mark on the node; Drain is the
	// mark (nil if not drained).
	Drained bool  `json:"drained"`
	Drain   *Mark `json:"drain,omitempty"`
	// Owned is the number of partitions whose claim the member holds.
	Owned int `json:"owned"`
	// Build is the member's build (its module version, or "devel"), empty
	// if it published none; Features the protocol features it
	// understands, empty (never nil) for a build that publishes none.
	Build    string   `json:"build"`
	Features []string `json:"features"`
	// TTLLeft is the time left on the lease, -1 if unknown (the Operator's
	// client is not a clientv3.Lease, or the lease could not be read).
	TTLLeft Seconds `json:"ttl_left_seconds"`
}

// Mark is an operator's mark in etcd: who set it, why and when. A drain
// key holds one (MemberStatus.Drain), and so does the balancer's
// suspension (BalancerState.Suspended).
type Mark struct {
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// PartitionStatus is one partition as an Operator sees it.
type PartitionStatus struct {
	// Partition is the partition number.
	Partition int `json:"partition"`
	// Owner holds the partition's claim, empty if it is unclaimed.
	Owner string `json:"owner,omitempty"`
	// Addr is Owner's advertised address, empty if unknown.
	Addr string `json:"addr,omitempty"`
	// Epoch is the claim's epoch (keys.ClaimEpoch), 0 if unclaimed.
	Epoch int64 `json:"epoch,omitempty"`
	// Since is when Owner created the claim, by its clock; zero if unknown.
	Since time.Time `json:"since,omitzero"`
	// Next is the partition's owner by the fleet's one rule (the ring with
	// the placements applied): the node that holds it when the fleet is
	// settled. Empty if the ring has no members.
	Next string `json:"next,omitempty"`
	// Placed names the origin of the placement that chose Next
	// ("pin" or "balance", as AuditRecord.Action
	// names a pin), empty if the ring alone did.
	Placed string `json:"placed,omitempty"`
	// Handoff reports a claim held by a node other than Next: a move in
	// progress (or stuck).
	Handoff bool `json:"handoff,omitempty"`
}

// view is the fleet read at one revision: spec, members, drain marks,
// claims and placements, decoded by the fleet reader's rules, with the ring of the members
// not drained.
type view struct {
	rev    int64
	stored fleetview.Spec // the spec, with its requires, resize and revision
	fleet  *fleetview.State
	drains map[string]Mark
	// migration is the ring-algorithm migration that runs, nil if none;
	// migrationRev its key's ModRevision.
	migration    *keys.MigrationRecord
	migrationRev int64
}

// view reads the fleet at one revision.
func (o *Operator) view(ctx context.Context) (*view, error) { return o.viewAt(ctx, 0) }

// viewAt reads the fleet at revision rev (0: the latest).
func (o *Operator) viewAt(ctx context.Context, rev int64) (*view, error) {
	at := clientv3.WithRev(rev)
	resp, err := o.kv.Txn(ctx).Then(
		clientv3.OpGet(o.layout.Spec(), at),
		clientv3.OpGet(o.layout.Members(), clientv3.WithPrefix(), at),
		clientv3.OpGet(o.layout.Claims(), clientv3.WithPrefix(), at),
		clientv3.OpGet(o.layout.DrainedPrefix(), clientv3.WithPrefix(), at),
		clientv3.OpGet(o.layout.Placements(), clientv3.WithPrefix(), at),
		clientv3.OpGet(o.layout.Migration(), at),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("fleet: read the fleet: %w", err)
	}
	if len(resp.Responses) != 6 {
		return nil, fmt.Errorf("fleet: read the fleet: %d responses for 6 reads", len(resp.Responses))
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().GetKvs() }
	if len(kvs(0)) == 0 {
		return nil, fmt.Errorf("%w at %s", ErrNoSpec, o.layout.Spec())
	}
	stored, err := fleetview.DecodeStored(kvs(0)[0].Value, kvs(0)[0].ModRevision)
	if err != nil {
		return nil, err
	}
	spec := stored.Spec
	log := hclog.NewNullLogger()
	r := &fleetview.Reader{Layout: o.layout, Partitions: spec.Partitions, Log: log}
	lst := r.Decode(resp.Header.Revision, kvs(1), kvs(2), kvs(3), kvs(4), kvs(0)[0])
	lst.Spec = stored
	v := &view{rev: lst.Rev, stored: stored, fleet: fleetview.NewState(spec.Config(), log), drains: make(map[string]Mark)}
	v.fleet.Apply(fleetview.Update{Listing: lst})
	if m := kvs(5); len(m) > 0 {
		rec := keys.DecodeMigration(m[0].Value)
		v.migration, v.migrationRev = &rec, m[0].ModRevision
	}
	for _, kv := range kvs(3) {
		if id, ok := r.DrainedID(kv.Key); ok {
			var d Mark
			_ = json.Unmarshal(kv.Value, &d) // an undecodable mark still drains
			v.drains[id] = d
		}
	}
	return v, nil
}

// partition returns the status of partition p in v.
func (v *view) partition(p int) PartitionStatus {
	f := v.fleet
	s := PartitionStatus{Partition: p}
	s.Next, _ = f.Owner(p)
	r := f.Ring
	if f.Shape.Target(p) {
		r = f.TargetRing
	}
	if !f.Shape.Active(p) {
		s.Next = ""
	}
	if ringOwner, _ := r.RingOwner(p); s.Next != "" && s.Next != ringOwner { // a placement chose the owner
		s.Placed = f.Placements[p].Origin
	}
	if c := f.Claims[p]; c.Epoch != 0 {
		s.Owner, s.Addr, s.Epoch, s.Since = c.Owner, f.Addr(c.Owner), c.Epoch, c.Since
		s.Handoff = c.Owner != s.Next
	}
	return s
}

// partitions returns the status of every partition in v.
func (v *view) partitions() []PartitionStatus {
	out := make([]PartitionStatus, len(v.fleet.Claims))
	for p := range out {
		out[p] = v.partition(p)
	}
	return out
}

// featureList returns fs, or an empty list for nil.
func featureList(fs []string) []string {
	if fs == nil {
		return []string{}
	}
	return fs
}

// Members reads the fleet's members, sorted by ID, drained ones included.
func (o *Operator) Members(ctx context.Context) ([]MemberStatus, error) {
	v, err := o.view(ctx)
	if err != nil {
		return nil, err
	}
	owned := make(map[string]int)
	for _, c := range v.fleet.Claims {
		if c.Epoch != 0 {
			owned[c.Owner]++
		}
	}
	out := make([]MemberStatus, 0, len(v.fleet.All))
	for _, id := range v.fleet.All {
		rec := v.fleet.Members[id]
		m := MemberStatus{ID: id, Addr: rec.Member.Addr, Meta: rec.Member.Meta, Lease: int64(rec.Lease), TTLLeft: -1, Owned: owned[id],
			Build: rec.Member.Build, Features: featureList(rec.Member.Features)}
		if d, ok := v.drains[id]; ok {
			m.Drained, m.Drain = true, &d
		}
		if o.lease != nil && rec.Lease != 0 {
			if resp, err := o.lease.TimeToLive(ctx, rec.Lease); err == nil && resp.TTL >= 0 {
				m.TTLLeft = Seconds(time.Duration(resp.TTL) * time.Second)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// Partitions reads every partition's claim, with the ring's owner of each.
func (o *Operator) Partitions(ctx context.Context) ([]PartitionStatus, error) {
	v, err := o.view(ctx)
	if err != nil {
		return nil, err
	}
	return v.partitions(), nil
}

// Lookup reads the status of key's partition: the same partition, owner
// and epoch that the Lookup of every reader of the fleet (a Node, an
// Observer) reports once the fleet is settled.
func (o *Operator) Lookup(ctx context.Context, key string) (PartitionStatus, error) {
	v, err := o.view(ctx)
	if err != nil {
		return PartitionStatus{}, err
	}
	return v.partition(v.fleet.Shape.Of(key)), nil
}

// LeaderStatus is one election as an Operator sees it.
type LeaderStatus struct {
	// Election is the election's name: its keys live under
	// <prefix><Election>/.
	Election string `json:"election"`
	// Holder is the leader's candidate ID; Value its published value.
	Holder string `json:"holder"`
	Value  string `json:"value,omitempty"`
	// Epoch is the CreateRevision of the leader's key: its term's epoch.
	Epoch int64 `json:"epoch"`
	// Key is the leader's key in etcd; Lease the lease it is bound to.
	Key   string `json:"key"`
	Lease int64  `json:"lease"`
	// Candidates is the number of candidates, the leader included.
	Candidates int `json:"candidates"`
}

// Leaders reads the elections under prefix ("" means the fleet's own,
// <prefix>leader/) from their candidates' keys and returns each one's
// leader, sorted by election name.
func (o *Operator) Leaders(ctx context.Context, prefix string) ([]LeaderStatus, error) {
	if prefix == "" {
		prefix = o.layout.Leaders()
	}
	byName, err := leaderkey.ReadAll(ctx, o.kv, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]LeaderStatus, 0, len(byName))
	for name, cs := range byName {
		l := cs[0]
		out = append(out, LeaderStatus{Election: name, Holder: l.ID, Value: l.Value, Epoch: l.Epoch, Key: l.Key, Lease: int64(l.Lease), Candidates: len(cs)})
	}
	slices.SortFunc(out, func(a, b LeaderStatus) int { return strings.Compare(a.Election, b.Election) })
	return out, nil
}
