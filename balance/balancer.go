package balance

import (
	"context"
	"errors"
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
)

// maxRemoves bounds the moves one pass removes, so that a pass stays
// within etcd's operations per transaction.
const maxRemoves = 32

// Balancer reads a fleet, plans passes and applies them, fenced by the
// term of the election it runs in. It is safe for concurrent use; passes
// run one at a time.
//
// Metrics (with Config.Metrics): tenure_balance_imbalance (gauge: max over
// mean load per weight before the last pass), tenure_balance_moves_total
// (counter by cause: "balance" for moves written, "removed" for moves
// removed because their node left or the ring agrees) and
// tenure_balance_passes_total (counter by result: "applied", "idle",
// "deposed", "stale", "error").
type Balancer struct {
	kv      clientv3.KV
	layout  keys.Layout
	cfg     Config
	metrics *metrics

	mu    sync.Mutex
	moved map[int]time.Time // when this balancer last moved each partition
}

// NewBalancer returns a Balancer of the fleet cfg names, reached through
// kv. Zero fields of cfg take DefaultConfig's values. Errors wrap
// ErrNilArgument or ErrInvalidConfig.
func NewBalancer(kv clientv3.KV, cfg Config) (*Balancer, error) {
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: etcd client", ErrNilArgument)
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
	return &Balancer{kv: kv, layout: keys.For(cfg.Cluster, cfg.Prefix), cfg: cfg, metrics: m, moved: make(map[int]time.Time)}, nil
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

// Planned is a pass with the snapshot it was computed from.
type Planned struct {
	Pass
	// Rev is the revision of the snapshot.
	Rev int64

	memberRevs    map[string]int64 // CreateRevision of each member key
	placementRevs map[int]int64    // ModRevision of each placement key
}

// Plan reads the fleet at one revision (spec, members, drain marks,
// placements and load reports) and plans a pass over it.
func (b *Balancer) Plan(ctx context.Context) (*Planned, error) {
	spec, err := fleetview.ReadSpec(ctx, b.kv, b.layout)
	if err != nil {
		return nil, err
	}
	r := &fleetview.Reader{KV: b.kv, Layout: b.layout, Partitions: spec.Partitions, Log: b.cfg.Logger}
	lst, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	reports, err := b.kv.Get(ctx, b.layout.Loads(), clientv3.WithPrefix(), clientv3.WithRev(lst.Rev))
	if err != nil {
		return nil, fmt.Errorf("balance: read load reports: %w", err)
	}
	f := fleetview.NewState(spec.Config(), b.cfg.Logger)
	f.Apply(fleetview.Update{Listing: lst})
	in := Input{Ring: f.Ring, Loads: make([]float64, spec.Partitions), Pinned: map[int]bool{}, Moves: map[int]string{}, Now: b.cfg.Clock.Now()}
	pl := &Planned{Rev: lst.Rev, memberRevs: map[string]int64{}, placementRevs: map[int]int64{}}
	for id := range lst.Members {
		pl.memberRevs[id] = 0 // filled below from the member keys
	}
	for p, e := range lst.Placements {
		pl.placementRevs[p] = e.ModRev
		if e.Origin == keys.OriginPin {
			in.Pinned[p] = true
		} else {
			in.Moves[p] = e.Node
		}
	}
	for _, kv := range reports.Kvs {
		id, ok := b.layout.LoadID(string(kv.Key))
		if !ok {
			continue
		}
		rep, err := keys.DecodeLoadReport(kv.Value)
		if err != nil {
			b.cfg.Logger.Warn("ignoring undecodable load report", "node", id, "error", err)
			continue
		}
		for i, p := range rep.Partitions {
			if p >= spec.Partitions {
				continue
			}
			if owner, _ := f.Ring.Owner(p); owner == id || in.Loads[p] == 0 {
				in.Loads[p] = rep.Loads[i]
			}
		}
	}
	b.mu.Lock()
	in.Moved = make(map[int]time.Time, len(b.moved))
	for p, t := range b.moved {
		in.Moved[p] = t
	}
	b.mu.Unlock()
	pl.Pass = Plan(in, b.cfg)
	if len(pl.Removes) > maxRemoves {
		pl.Removes = pl.Removes[:maxRemoves]
	}
	members, err := b.kv.Get(ctx, b.layout.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(lst.Rev))
	if err != nil {
		return nil, fmt.Errorf("balance: read members: %w", err)
	}
	for _, kv := range members.Kvs {
		if id, ok := b.layout.MemberID(string(kv.Key)); ok {
			pl.memberRevs[id] = kv.CreateRevision
		}
	}
	b.metrics.imbalance(pl.Before)
	return pl, nil
}

// Apply writes pl's moves and removals in one transaction, fenced by
// term and by pl's snapshot: it lands only if term still stands
// (ErrDeposed otherwise), and no member key or drain mark was written
// since the snapshot, every move's target is still the member it was, and
// no placement of pl's partitions was written meanwhile (ErrStaleSnapshot
// otherwise). A pass with nothing to do writes nothing.
func (b *Balancer) Apply(ctx context.Context, term *election.Term, pl *Planned) error {
	if term == nil || pl == nil {
		return fmt.Errorf("%w: term or pass", ErrNilArgument)
	}
	if len(pl.Moves) == 0 && len(pl.Removes) == 0 {
		b.metrics.pass("idle")
		return nil
	}
	next := pl.Rev + 1
	cmps := []clientv3.Cmp{
		term.Cmp(),
		clientv3.Compare(clientv3.ModRevision(b.layout.Members()), "<", next).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(b.layout.DrainedPrefix()), "<", next).WithPrefix(),
	}
	var ops []clientv3.Op
	for _, m := range pl.Moves {
		k := b.layout.Placement(m.Partition)
		cmps = append(cmps,
			clientv3.Compare(clientv3.ModRevision(k), "=", pl.placementRevs[m.Partition]),
			clientv3.Compare(clientv3.CreateRevision(b.layout.Member(m.To)), "=", pl.memberRevs[m.To]))
		ops = append(ops, clientv3.OpPut(k, keys.EncodePlacement(keys.Placement{Node: m.To, Origin: keys.OriginBalance, Rev: pl.Rev})))
	}
	for _, p := range pl.Removes {
		if containsMove(pl.Moves, p) {
			continue
		}
		k := b.layout.Placement(p)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", pl.placementRevs[p]))
		ops = append(ops, clientv3.OpDelete(k))
	}
	resp, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(term.Key())).Commit()
	if err != nil {
		b.metrics.pass("error")
		return fmt.Errorf("balance: apply pass at revision %d: %w", pl.Rev, err)
	}
	if !resp.Succeeded {
		if rr := resp.Responses[0].GetResponseRange(); rr == nil || len(rr.Kvs) == 0 || rr.Kvs[0].CreateRevision != term.Epoch() {
			b.metrics.pass("deposed")
			return fmt.Errorf("%w: term %d", ErrDeposed, term.Epoch())
		}
		b.metrics.pass("stale")
		return fmt.Errorf("%w: snapshot at revision %d", ErrStaleSnapshot, pl.Rev)
	}
	now := b.cfg.Clock.Now()
	b.mu.Lock()
	for _, m := range pl.Moves {
		b.moved[m.Partition] = now
	}
	b.mu.Unlock()
	b.metrics.pass("applied")
	b.metrics.moves("balance", len(pl.Moves))
	b.metrics.moves("removed", len(ops)-len(pl.Moves))
	b.cfg.Logger.Info("balance pass applied", "revision", pl.Rev, "moves", len(pl.Moves), "removed", len(ops)-len(pl.Moves),
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

// Run campaigns in e and, while it leads, runs a pass every
// Config.Interval, until ctx ends. A pass refused as stale is planned
// again at the next interval; a deposed balancer campaigns again. It
// returns ctx's error.
func (b *Balancer) Run(ctx context.Context, e *election.Election) error {
	for {
		term, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.cfg.Logger.Warn("balancer campaign", "error", err)
			if !clock.Sleep(ctx, b.cfg.Clock, b.cfg.Interval) {
				return ctx.Err()
			}
			continue
		}
		b.lead(ctx, term)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// lead runs passes while term stands.
func (b *Balancer) lead(ctx context.Context, term *election.Term) {
	tctx := term.Context()
	for {
		if !clock.Sleep(tctx, b.cfg.Clock, b.cfg.Interval) || ctx.Err() != nil {
			return
		}
		pl, err := b.Plan(tctx)
		if err == nil {
			err = b.Apply(tctx, term, pl)
		}
		switch {
		case errors.Is(err, ErrDeposed):
			return
		case err != nil && tctx.Err() == nil:
			b.cfg.Logger.Warn("balance pass", "error", err)
		}
	}
}
