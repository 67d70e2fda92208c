package scale

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// The load meter's defaults (ownership.Config's LoadInterval and
// LoadBudget), by which the report writes are counted.
const (
	meterInterval = 10 * time.Second
	meterBudget   = 5.0
)

// PlacementFigures computes, for a fleet of cfg.Nodes x cfg.Partitions on
// AlgorithmWeighted (every cfg.RingHeavy-th node of weight 2), with the
// load cfg.LoadModel names (by default cfg.LoadKeys keys of
// Zipf-distributed rates, s = 0.9):
//
//   - the etcd writes of the nodes' load reports, counted on a virtual
//     hour by the load meter's own rule (a node writes its report at most
//     every max(LoadInterval, members/LoadBudget), only when it changed;
//     reports of noisy load always change), for nodes that joined at once
//     (aligned) and spread over the interval;
//   - the time of one balance pass: balance.Plan alone, and a Balancer's
//     Plan (its reads of the fleet at one revision included) and Apply
//     against an in-memory etcd holding the fleet's spec, members, claims
//     and load reports, the balancer elected by tenure's election;
//   - the passes, moves and etcd writes for moves until the balancer
//     stops moving, its moves applied as placements on virtual time.
func PlacementFigures(ctx context.Context, cfg Config) (*PlacementReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n, p := cfg.Nodes, cfg.Partitions
	rep := &PlacementReport{Nodes: n, Partitions: p, Heavy: cfg.RingHeavy, Keys: cfg.LoadKeys}
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.Member{ID: fmt.Sprintf("node-%04d", i), Weight: 1}
		if cfg.RingHeavy > 0 && i%cfg.RingHeavy == 0 {
			ms[i].Weight = 2
		}
	}
	rc := ring.Config{Partitions: p, LoadFactor: cfg.LoadFactor, Algorithm: ring.AlgorithmWeighted}
	r, err := ring.NewWeighted(ms, rc)
	if err != nil {
		return nil, err
	}
	var loads []float64
	switch cfg.LoadModel {
	case "", LoadZipf:
		loads = zipfLoads(cfg.LoadKeys, p, 0.9)
	case LoadTenants:
		loads = tenantLoads(5000, p, cfg.Seed)
	case LoadUniform:
		loads = uniformLoads(p, cfg.Seed)
	}
	rep.Model = cfg.LoadModel
	total, top := 0.0, 0.0
	for _, l := range loads {
		total += l
		top = max(top, l)
	}
	weight, heaviest := 0, 1
	for _, m := range ms {
		weight += m.Weight
		heaviest = max(heaviest, m.Weight)
	}
	rep.LowerBound = top / (total / float64(weight)) / float64(heaviest)

	rep.Aligned, rep.AlignedPeak = reportWrites(n, false)
	rep.Spread, rep.SpreadPeak = reportWrites(n, true)

	bc := balance.DefaultConfig()
	in := balance.Input{Ring: r, Loads: loads, Pinned: map[int]bool{}, Moves: map[int]string{}, Moved: map[int]time.Time{}, Now: time.Unix(0, 0)}
	runs, start := 0, time.Now()
	var first balance.Pass
	for runs < 5 || time.Since(start) < 200*time.Millisecond {
		first = balance.Plan(in, bc)
		runs++
	}
	rep.Plan = time.Since(start) / time.Duration(runs)
	rep.FirstMoves, rep.Before = len(first.Moves), first.Before

	// Converge on virtual time: each pass's moves become placements; a
	// pass every Interval.
	moves := map[int]string{}
	for rep.Passes < 200 {
		in.Ring = r.Place(placementsOf(moves))
		in.Moves = moves
		pass := balance.Plan(in, bc)
		if len(pass.Moves) == 0 && len(pass.Removes) == 0 {
			rep.After = pass.Before
			break
		}
		rep.Passes++
		rep.PlanDuplicates += duplicates(pass.Moves)
		rep.Moves += len(pass.Moves)
		rep.MaxMoves = max(rep.MaxMoves, len(pass.Moves))
		for _, q := range pass.Removes {
			delete(moves, q)
		}
		for _, m := range pass.Moves {
			moves[m.Partition] = m.To
			in.Moved[m.Partition] = in.Now
		}
		rep.After = pass.After
		in.Now = in.Now.Add(bc.Interval)
	}

	if err := balancerPass(ctx, cfg, rc, ms, r, loads, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// placementsOf returns moves as ring placements.
func placementsOf(moves map[int]string) []ring.Placement {
	out := make([]ring.Placement, 0, len(moves))
	for q, node := range moves {
		out = append(out, ring.Placement{Partition: q, Node: node})
	}
	return out
}

// zipfLoads returns the load of each of p partitions when keys keys, key k
// (from 1) of rate 1/k^s, hash to partitions as the ring hashes them; the
// loads add up to keys units per second.
func zipfLoads(keys, p int, s float64) []float64 {
	loads := make([]float64, p)
	sum := 0.0
	for k := 1; k <= keys; k++ {
		rate := math.Pow(float64(k), -s)
		loads[ring.PartitionOf(fmt.Sprintf("key-%d", k), p)] += rate
		sum += rate
	}
	for i := range loads {
		loads[i] *= float64(keys) / sum
	}
	return loads
}

// tenantLoads returns the load of each of p partitions when tenants
// tenants, of sizes spread log-uniformly over 1 to 1,000, hash to
// partitions as the ring hashes their names.
func tenantLoads(tenants, p int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x74656e616e74)) // "tenant"
	loads := make([]float64, p)
	for i := range tenants {
		loads[ring.PartitionOf(fmt.Sprintf("tenant-%d", i), p)] += math.Exp(rng.Float64() * math.Log(1000))
	}
	return loads
}

// uniformLoads returns p loads spread uniformly over 0.5 to 1.5: load the
// balancer can even out, so that its passes move their whole budget.
func uniformLoads(p int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x756e69)) // "uni"
	loads := make([]float64, p)
	for i := range loads {
		loads[i] = 0.5 + rng.Float64()
	}
	return loads
}

// reportWrites counts, on a virtual hour, the load reports n nodes write
// by the load meter's rule: each ticks every meterInterval from the time
// it joined and writes on a tick at least max(meterInterval,
// n/meterBudget) after its last write. With spread, the nodes joined
// evenly over one report interval; otherwise all at once. It returns the
// mean writes per second and the most written in one second.
func reportWrites(n int, spread bool) (perSecond float64, peak int) {
	const hour = time.Hour
	every := max(meterInterval, time.Duration(float64(n)/meterBudget*float64(time.Second)))
	bySecond := make(map[int64]int)
	total := 0
	for i := range n {
		var joined time.Duration
		if spread {
			joined = every * time.Duration(i) / time.Duration(n)
		}
		last := time.Duration(-1)
		for t := joined + meterInterval; t < hour; t += meterInterval {
			if last >= 0 && t-last < every {
				continue
			}
			last = t
			total++
			bySecond[int64(t/time.Second)]++
		}
	}
	for _, c := range bySecond {
		peak = max(peak, c)
	}
	return float64(total) / hour.Seconds(), peak
}

// balancerPass measures one Balancer pass against an in-memory etcd that
// holds the fleet's spec, members, claims and load reports: the time of Plan (its
// reads included) and of Apply, and Apply's etcd writes.
func balancerPass(ctx context.Context, cfg Config, rc ring.Config, ms []ring.Member, r *ring.Ring, loads []float64, rep *PlacementReport) error {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	if err != nil {
		return err
	}
	defer srv.Close()
	cli := srv.NewClient()
	defer cli.Close()
	const cluster = "scale"
	l := keys.New(cluster)
	spec, err := fleetview.EncodeSpec(rc.Spec())
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, l.Spec(), string(spec)); err != nil {
		return err
	}
	for _, m := range ms {
		v, err := keys.EncodeMember(keys.Member{ID: m.ID, Addr: m.ID + ":1", Weight: m.Weight, Features: fleetview.Features()})
		if err != nil {
			return err
		}
		if _, err := cli.Put(ctx, l.Member(m.ID), v); err != nil {
			return err
		}
		lr := keys.LoadReport{Window: time.Minute.Seconds()}
		for _, q := range r.Owned(m.ID) {
			lr.Partitions = append(lr.Partitions, q)
			lr.Loads = append(lr.Loads, loads[q])
		}
		if _, err := cli.Put(ctx, l.Load(m.ID), keys.EncodeLoadReport(lr)); err != nil {
			return err
		}
	}
	for q := range r.Partitions() {
		owner, _ := r.Owner(q)
		if _, err := cli.Put(ctx, l.Claim(q), keys.EncodeClaim(owner, fc.Now())); err != nil {
			return err
		}
	}
	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 10 * time.Second, Clock: fc})
	if err != nil {
		return err
	}
	defer func() { _ = sess.Close(context.Background()) }()
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: cluster, Name: "balancer", ID: "balancer-0"})
	if err != nil {
		return err
	}
	defer func() { _ = e.Close(context.Background()) }()
	term, err := e.Campaign(ctx)
	if err != nil {
		return err
	}
	b, err := balance.NewBalancer(cli, balance.Config{Cluster: cluster, Clock: fc})
	if err != nil {
		return err
	}
	// The fleet's first move records the placements feature in its spec,
	// once per fleet: recorded here, so that the pass measured is any pass.
	if _, err := fleetview.RequireFeature(ctx, cli, keys.New(cluster), fleetview.FeaturePlacements); err != nil {
		return err
	}
	start := time.Now()
	pl, err := b.Plan(ctx)
	if err != nil {
		return err
	}
	rep.BalancerPlan = time.Since(start)
	rep.Duplicates = duplicates(pl.Moves)
	if rep.Duplicates > 0 {
		// balance.Plan moved a partition twice in this pass, and etcd
		// refuses a transaction that puts one key twice: apply each
		// partition's last move only.
		last := map[int]int{}
		for i, m := range pl.Moves {
			last[m.Partition] = i
		}
		kept := pl.Moves[:0]
		for i, m := range pl.Moves {
			if last[m.Partition] == i {
				kept = append(kept, m)
			}
		}
		pl.Moves = kept
	}
	before := cli.Stats().Writes
	start = time.Now()
	if err := b.Apply(ctx, term, pl); err != nil {
		return err
	}
	rep.BalancerApply = time.Since(start)
	rep.ApplyWrites = cli.Stats().Writes - before
	rep.ApplyMoves = len(pl.Moves)
	return nil
}

// duplicates returns how many of moves move a partition an earlier one
// of them moved.
func duplicates(moves []balance.Move) int {
	seen, dup := map[int]bool{}, 0
	for _, m := range moves {
		if seen[m.Partition] {
			dup++
		}
		seen[m.Partition] = true
	}
	return dup
}
