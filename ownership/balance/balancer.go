package balance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// A pass is applied in one etcd transaction, which etcd bounds to
// maxTxnOps comparisons and maxTxnOps operations (its --max-txn-ops
// default). Apply compares passCmps keys for the whole pass, two for each
// move and one for each removal, so a pass removes at most maxRemoves of
// the moves no longer needed and makes at most maxMoves moves; the rest is
// left to the next passes.
const (
	maxTxnOps  = 128
	passCmps   = 4
	maxRemoves = 32
	maxMoves   = (maxTxnOps - passCmps - maxRemoves) / 2
)

// Balancer reads a fleet, plans passes and applies them, fenced by the
// term of the election it runs in. It is safe for concurrent use.
//
// Everything a pass depends on is read from etcd at one revision: the
// members and their weights, drain marks, placements, load reports, an
// operator's suspension (fleet.Operator.SuspendBalancer) and the cooldown
// (each balancer move records when it was written), so a balancer elected
// after a failover, and a dry run (Plan without Apply), plan as the last
// one would have.
//
// Metrics (with Config.Metrics):
//   - tenure_balance_imbalance (gauge): max over mean load per weight at
//     the last snapshot planned from;
//   - tenure_balance_member_load{member} (gauge): each member's load at
//     that snapshot; members that left are deleted;
//   - tenure_balance_suspended (gauge): 1 while an operator's suspension
//     stands at that snapshot;
//   - tenure_balance_moves_total{cause} (counter): partitions moved, by
//     cause: "balance" counted when this balancer's pass lands, "pin" and
//     "membership" when a pass's snapshot finds a partition whose owner
//     changed since this balancer's previous snapshot, because of a pin
//     or unpin, or else because members joined, left, were drained or
//     changed weight;
//   - tenure_balance_removed_total (counter): balancer moves removed
//     because their node left or the ring agrees;
//   - tenure_balance_passes_total{result} (counter): "applied", "idle",
//     "suspended", "alarm" (an etcd alarm stood: see alarm.go), "deposed",
//     "stale", "error".
//
// While an etcd alarm stands (NOSPACE: its database is full, and etcd
// refuses every put), the balancer pauses: its passes are planned and
// reported but write nothing, and Run logs why once and says when it
// resumes (alarm.go).
type Balancer struct {
	kv      clientv3.KV
	list    any // kv, which Plan lists etcd's alarms through (etcderr.Alarms)
	layout  keys.Layout
	cfg     Config
	metrics *metrics

	mu   sync.Mutex
	last *snapshot // the previous snapshot planned from
}

// NewBalancer returns a Balancer of the fleet cfg names, reached through
// kv. If kv also implements clientv3.Maintenance (a *clientv3.Client
// does), each Plan lists the alarms that stand in etcd (one raft proposal
// a pass), and the balancer pauses while any does; otherwise it learns of
// the NOSPACE alarm from its refused passes. Zero fields of cfg take DefaultConfig's values. Errors wrap
// ErrNilArgument or ErrInvalidConfig.
func NewBalancer(kv clientv3.KV, cfg Config) (*Balancer, error) {
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd client", ErrNilArgument)
	}
	if cfg.TracerProvider != nil && nilness.Is(cfg.TracerProvider) {
		return nil, fmt.Errorf("%w: tracer provider %T", ErrNilArgument, cfg.TracerProvider)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validateFleet(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	return &Balancer{kv: kv, list: kv, layout: keys.For(cfg.Cluster, cfg.Prefix), cfg: cfg, metrics: m}, nil
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Upper == 0 {
		c.Upper = d.Upper
	}
	if c.Lower == 0 {
		c.Lower = d.Lower
	}
	if c.Budget == 0 {
		c.Budget = d.Budget
	}
	if c.Cooldown == 0 {
		c.Cooldown = d.Cooldown
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// Planned is a pass with the snapshot it was computed from. Plan leaves
// none of its lists nil.
type Planned struct {
	Pass
	// Rev is the revision of the snapshot.
	Rev int64 `json:"revision"`
	// Suspended is the operator's suspension that stood at the snapshot,
	// nil if none: Apply then writes nothing.
	Suspended *fleet.Mark `json:"suspended,omitempty"`
	// Alarms are the alarms that stood in etcd just after the snapshot,
	// listed if the Balancer's client can list them (see NewBalancer):
	// while any stands, Apply writes nothing (the balancer pauses).
	Alarms []fleet.EtcdAlarm `json:"alarms,omitempty"`
	// Resizing names the resize of the partition count in progress at the
	// snapshot, empty if none: the balancer pauses while one runs (its
	// groups move as planned moves of their own), and Apply writes
	// nothing.
	Resizing string `json:"resizing,omitempty"`
	// Loads is each member's load at the snapshot (members not drained):
	// the sum of the loads of the partitions the fleet's rule gives it.
	Loads map[string]float64 `json:"loads"`

	memberRevs    map[string]int64 // CreateRevision of each member key
	placementRevs map[int]int64    // ModRevision of each placement key
	specRev       int64            // ModRevision of the spec
}

// Plan reads the fleet at one revision (spec, members, drain marks,
// placements, load reports, suspension) and plans a pass over it. Loads
// are attributed by the rule fleet.Operator.Placement reports by; the
// cooldown of a partition runs from the time recorded in its balancer
// move. Plan writes nothing: it is also the dry run of a pass.
func (b *Balancer) Plan(ctx context.Context) (*Planned, error) {
	spec, err := fleet.ReadSpec(ctx, b.kv, b.layout.Prefix())
	if err != nil {
		return nil, err
	}
	r := &fleetview.Reader{KV: b.kv, Layout: b.layout, Partitions: spec.Partitions, Log: b.cfg.Logger}
	lst, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	reports, err := fleetview.ReadLoads(ctx, b.kv, b.layout, lst.Rev, b.cfg.Logger)
	if err != nil {
		return nil, err
	}
	resp, err := b.kv.Txn(ctx).Then(
		clientv3.OpGet(b.layout.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(lst.Rev)),
		clientv3.OpGet(b.layout.BalanceSuspended(), clientv3.WithRev(lst.Rev)),
		clientv3.OpGet(b.layout.Migration(), clientv3.WithRev(lst.Rev)),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("balance: read members and suspension: %w", err)
	}
	f := fleetview.NewState(spec.Config(), b.cfg.Logger)
	f.Apply(fleetview.Update{Listing: lst})
	in := Input{Ring: f.Ring, Loads: fleetview.PartitionLoads(f.Ring, reports), Pinned: map[int]bool{}, Moves: map[int]string{},
		Moved: map[int]time.Time{}, Now: b.cfg.Clock.Now()}
	pl := &Planned{Rev: lst.Rev, Loads: fleetview.MemberLoads(f.Ring, in.Loads), memberRevs: map[string]int64{}, placementRevs: map[int]int64{},
		specRev: lst.Shape.SpecRev}
	if rs := lst.Shape.Resize; rs != nil {
		pl.Resizing = fmt.Sprintf("resize %s of the partition count, %d -> %d", rs.ID, rs.From, rs.To)
		if rs.Aborting {
			pl.Resizing += " (aborting)"
		}
	}
	for p, e := range lst.Placements {
		pl.placementRevs[p] = e.ModRev
		switch {
		case e.Origin == keys.OriginPin, e.Origin == keys.OriginMigration:
			in.Pinned[p] = true
		default:
			in.Moves[p] = e.Node
			if e.Time > 0 {
				in.Moved[p] = time.UnixMilli(e.Time)
			}
		}
	}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		if id, ok := b.layout.MemberID(string(kv.Key)); ok {
			pl.memberRevs[id] = kv.CreateRevision
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		sus := fleet.Mark(keys.DecodeBalanceSuspend(kvs[0].Value))
		pl.Suspended = &sus
	}
	if kvs := resp.Responses[2].GetResponseRange().GetKvs(); len(kvs) > 0 && pl.Suspended == nil {
		m := keys.DecodeMigration(kvs[0].Value)
		pl.Suspended = &fleet.Mark{Actor: m.Actor, Reason: "paused by the ring-algorithm migration to " + ring.Algorithm(m.Target).String() + ": " + m.Reason, Time: m.Time}
	}
	cfg := b.cfg
	if parts := f.Ring.Partitions(); Budget(parts, cfg.Budget) > maxMoves {
		cfg.Budget = float64(maxMoves) / float64(parts)
	}
	if pl.Resizing == "" {
		pl.Pass = Plan(in, cfg)
	}
	if len(pl.Removes) > maxRemoves {
		pl.Removes = pl.Removes[:maxRemoves]
	}
	if pl.Moves == nil {
		pl.Moves = []Move{}
	}
	if pl.Removes == nil {
		pl.Removes = []int{}
	}
	if pl.Alarms, err = b.alarms(ctx); err != nil {
		return nil, err
	}
	b.observe(newSnapshot(lst, f.Ring))
	b.metrics.snapshot(pl)
	return pl, nil
}

// Apply writes pl's moves and removals, and the record of the pass
// (keys.BalancePassRecord, which fleet.Operator reads as a
// fleet.BalancerPass), in one transaction, fenced by term and by pl's
// snapshot: it lands only if term still stands (ErrDeposed otherwise), no
// suspension stands (ErrSuspended otherwise, and for a pass planned while
// one stood), and no member key or drain mark was written since the
// snapshot, every move's target is still the member it was, and no
// placement of pl's partitions was written meanwhile, and the spec is
// the snapshot's (no resize of the partition count started since;
// ErrStaleSnapshot otherwise). A pass planned during a resize is refused
// with ErrSuspended. While an etcd alarm stands (pl.Alarms, or etcd
// refusing the pass for its NOSPACE alarm), it writes nothing and returns
// an error naming the alarms (wrapping fleet.ErrNoSpace for NOSPACE). A
// pass with nothing to do writes nothing.
func (b *Balancer) Apply(ctx context.Context, term *election.Term, pl *Planned) error {
	if term == nil || pl == nil {
		return fmt.Errorf("%w: term or pass", ErrNilArgument)
	}
	if pl.Suspended != nil {
		b.metrics.pass("suspended")
		return fmt.Errorf("%w by %s: %s", ErrSuspended, pl.Suspended.Actor, pl.Suspended.Reason)
	}
	if len(pl.Alarms) > 0 {
		b.metrics.pass("alarm")
		return alarmErr(pl.Alarms)
	}
	if pl.Resizing != "" {
		b.metrics.pass("suspended")
		return fmt.Errorf("%w while a %s is in progress", ErrSuspended, pl.Resizing)
	}
	if len(pl.Moves) == 0 && len(pl.Removes) == 0 {
		b.metrics.pass("idle")
		return nil
	}
	specRev := pl.specRev
	if len(pl.Moves) > 0 {
		spec, err := fleetview.RequireFeature(ctx, b.kv, b.layout, fleetview.FeaturePlacements)
		if err != nil {
			return b.refused(pl.Rev, err)
		}
		if spec.Resize != nil {
			b.metrics.pass("stale")
			return fmt.Errorf("%w: snapshot at revision %d, before resize %s of the partition count started", ErrStaleSnapshot, pl.Rev, spec.Resize.ID)
		}
		// Recording the feature wrote the spec, or found it written since
		// the snapshot, with no resize in progress: the pass is guarded by
		// the spec as recorded.
		specRev = spec.ModRev
	}
	now := b.cfg.Clock.Now()
	next := pl.Rev + 1
	sk := b.layout.BalanceSuspended()
	cmps := []clientv3.Cmp{
		term.Cmp(),
		clientv3.Compare(clientv3.CreateRevision(sk), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(b.layout.Migration()), "=", 0),
		clientv3.Compare(clientv3.ModRevision(b.layout.Members()), "<", next).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(b.layout.DrainedPrefix()), "<", next).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(b.layout.Spec()), "=", specRev),
	}
	rec := keys.BalancePassRecord{Rev: pl.Rev, Term: term.Token().Epoch, Time: now.UTC(), Moves: make([]keys.BalanceMove, 0, len(pl.Moves)),
		Before: pl.Before, After: pl.After, Upper: b.cfg.Upper, Lower: b.cfg.Lower, Budget: b.cfg.Budget, Cooldown: b.cfg.Cooldown}
	var ops []clientv3.Op
	for _, m := range pl.Moves {
		k := b.layout.Placement(m.Partition)
		cmps = append(cmps,
			clientv3.Compare(clientv3.ModRevision(k), "=", pl.placementRevs[m.Partition]),
			clientv3.Compare(clientv3.CreateRevision(b.layout.Member(m.To)), "=", pl.memberRevs[m.To]))
		ops = append(ops, clientv3.OpPut(k, keys.EncodePlacement(keys.Placement{Node: m.To, Origin: keys.OriginBalance, Rev: pl.Rev, Time: now.UnixMilli()})))
		rec.Moves = append(rec.Moves, keys.BalanceMove(m))
	}
	for _, p := range pl.Removes {
		if containsMove(pl.Moves, p) {
			continue
		}
		k := b.layout.Placement(p)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", pl.placementRevs[p]))
		ops = append(ops, clientv3.OpDelete(k))
		rec.Removed = append(rec.Removed, p)
	}
	ops = append(ops, clientv3.OpPut(b.layout.BalancePass(), keys.EncodeJSON(rec)))
	resp, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(term.Key()), clientv3.OpGet(sk, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return b.refused(pl.Rev, err)
	}
	if !resp.Succeeded {
		if rr := resp.Responses[0].GetResponseRange(); rr == nil || len(rr.Kvs) == 0 || rr.Kvs[0].CreateRevision != term.Token().Epoch {
			b.metrics.pass("deposed")
			return fmt.Errorf("%w: term %d", ErrDeposed, term.Token().Epoch)
		}
		if rr := resp.Responses[1].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			b.metrics.pass("suspended")
			return fmt.Errorf("%w after the snapshot at revision %d", ErrSuspended, pl.Rev)
		}
		b.metrics.pass("stale")
		return fmt.Errorf("%w: snapshot at revision %d", ErrStaleSnapshot, pl.Rev)
	}
	b.metrics.pass("applied")
	b.metrics.moves("balance", len(pl.Moves))
	b.metrics.removed(len(rec.Removed))
	b.cfg.Logger.Info("balance pass applied", "revision", pl.Rev, "moves", len(pl.Moves), "removed", len(rec.Removed),
		"imbalance_before", pl.Before, "imbalance_after", pl.After)
	return nil
}

func containsMove(ms []Move, p int) bool {
	for _, m := range ms {
		if m.Partition == p {
			return true
		}
	}
	return false
}
