package simulation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/clock"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// Result is one run's outcome.
type Result struct {
	Config   Config
	Schedule Schedule
	Report   *check.Report
	// Virtual is the virtual time the run covered, Wall the real time it
	// took.
	Virtual, Wall time.Duration
	// Pauses and Hangs count the process pauses and hung release
	// callbacks that happened.
	Pauses, Hangs int
	// Refused counts the writes the store refused as stale: the fence at
	// work.
	Refused int
	// FloorRaises counts the RaiseFloor faults whose Put landed.
	FloorRaises int
	// Prepares counts the preparations of planned moves (OnPrepare), of
	// which PreparesHung hung until the move went on without them or was
	// called off, and PreparesLost ended with their node's session (a
	// crash, a pause, a partition).
	Prepares, PreparesHung, PreparesLost int
	// Handovers counts the hand-overs of claims to the next owner that
	// etcd applied while the workload ran, HandoversRefused those it
	// refused (their holders deleted the claims instead).
	// SuccessorsKilledBefore counts the successors stopped just before a
	// hand-over's transaction (KillSuccessor), KilledBeforeRefused those
	// whose hand-over etcd then refused; SuccessorsKilledAfter those
	// stopped once it committed, KilledAfterServed those of them that had
	// served the partition already.
	Handovers, HandoversRefused                                                           int
	SuccessorsKilledBefore, KilledBeforeRefused, SuccessorsKilledAfter, KilledAfterServed int
	// BalancerMoves counts the partitions moved by the balancer that runs
	// in one tenure seed in three (the placements it wrote that landed in
	// etcd); Balanced says whether the run had it.
	BalancerMoves int
	Balanced      bool
	// Resizes and Migrations count the shape changes of the fleet that
	// completed (aborts included), Aborted those aborted, Interrupted
	// those whose first driver stopped before the end; Unfinished those
	// still in progress when the workload stopped, and Refusals the
	// errors that refused one.
	Resizes, Migrations, Aborted, Interrupted, Unfinished int
	Refusals                                              []string
	// Compared counts the comparisons of a node's routes with a
	// fleet.Observer's at one etcd revision, over ComparedRevisions
	// revisions; Disagreements the keys on which a node and the Observer
	// differed, per comparison (the first of which Disagreed lists in
	// words).
	Compared, ComparedRevisions, Disagreements int
	Disagreed                                  []string
	// HealedAt is when the last fault was over.
	HealedAt time.Duration
}

// OK reports whether the run broke no checked property: the checkers'
// and the readers' agreement at every revision.
func (r *Result) OK() bool { return r.Report.OK() && r.Disagreements == 0 }

// Command is the command line that replays the run's schedule and
// workload.
func (r *Result) Command() string { return ReplayCommand(r.Config) }

// ReplayCommand is the command line that replays cfg.
func ReplayCommand(cfg Config) string {
	cfg = cfg.withDefaults()
	d := DefaultConfig()
	s := fmt.Sprintf("go run ./sim -seed %d -strategy %s", cfg.Seed, cfg.Strategy)
	if cfg.Nodes != d.Nodes {
		s += fmt.Sprintf(" -nodes %d", cfg.Nodes)
	}
	if cfg.Faults != d.Faults {
		s += fmt.Sprintf(" -faults %d", cfg.Faults)
	}
	if cfg.FloorRaises != d.FloorRaises {
		s += fmt.Sprintf(" -floor-raises %d", cfg.FloorRaises)
	}
	if cfg.Reshapes != d.Reshapes {
		s += fmt.Sprintf(" -reshapes %d", cfg.Reshapes)
	}
	if cfg.SuccessorKills != d.SuccessorKills {
		s += fmt.Sprintf(" -successor-kills %d", cfg.SuccessorKills)
	}
	if cfg.Duration != d.Duration {
		s += fmt.Sprintf(" -duration %v", cfg.Duration)
	}
	return s + " -v"
}

// Run runs one seeded simulation and checks it. The error is for a run
// that could not be set up or checked; violations are in the Result.
func Run(cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	wallStart := time.Now()
	fc := newFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	drv := startDriver(fc, cfg.Step, cfg.Yield, cfg.Spins)
	defer drv.Stop()

	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	endCtx, endRun := context.WithCancel(context.Background())
	w := &world{cfg: cfg, sched: NewSchedule(cfg), fc: fc, srv: srv, ctx: workCtx, end: endCtx}
	defer w.heals.Wait()
	defer endRun()
	w.start = fc.Now()
	for i := range cfg.Nodes {
		cli := srv.NewClient()
		defer cli.Close()
		w.nodes = append(w.nodes, &simNode{w: w, idx: i, id: nodeID(i), cli: cli, clock: newSkewClock(fc, w.sched.Rates[i])})
	}
	var ex executor
	switch cfg.Strategy {
	case Tenure, TenureUnfenced:
		t, err := newTenure(workCtx, w, cfg.Strategy == Tenure)
		if err != nil {
			return nil, fmt.Errorf("simulation: seed %d: %w", cfg.Seed, err)
		}
		ex = t
	case RedisLock, EtcdMutex:
		ex = newLockEx(w, cfg.Strategy == RedisLock)
	}
	for i := range cfg.Keys {
		w.rec.SetInitial(keyName(i), "0")
	}

	// The schedule's times count from the start of the run; faults begin
	// after a TTL, by which the fleet has claimed every partition.
	var shape *reshaper
	var rd *readers
	if t, ok := ex.(*tenureEx); ok {
		waitOwned(w, t, cfg.TTL*5)
		if shape, rd, err = startShape(workCtx, w, t); err != nil {
			return nil, fmt.Errorf("simulation: seed %d: %w", cfg.Seed, err)
		}
	}
	from := w.now()
	admin := srv.NewClient()
	defer admin.Close()
	var wg sync.WaitGroup
	wg.Go(func() { w.inject(workCtx, admin) })
	for i := range cfg.Clients {
		c := &client{w: w, idx: i, name: fmt.Sprintf("c%d", i+1), ex: ex,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))}
		wg.Go(func() { c.run(workCtx) })
	}
	clock.Sleep(context.Background(), fc, cfg.Duration)
	until := w.now()
	stopWork()
	wg.Wait()
	// A fault still in force outlasted the run (its injection was late):
	// healed now.
	endRun()
	w.heals.Wait()
	res := &Result{Config: cfg, Schedule: w.sched, Virtual: until}
	scopes := cfg.Partitions
	if shape != nil {
		p, inProgress, err := shape.finalPartitions()
		shape.close()
		rd.close()
		if err != nil {
			return nil, fmt.Errorf("simulation: seed %d: the partition count at the end: %w", cfg.Seed, err)
		}
		st := &shape.stats
		res.Resizes, res.Migrations, res.Interrupted, res.Aborted = st.resizes, st.migrations, st.interrupted, st.aborted
		res.Unfinished, res.Refusals = st.unfinished, st.refused
		res.Compared, res.ComparedRevisions, res.Disagreements, res.Disagreed = rd.result()
		scopes = p
		if inProgress {
			// A resize still moving at the end: its groups' partitions
			// are not all claimable yet; liveness is not measured.
			w.healed(until)
		}
	}
	for i := range cfg.Keys {
		w.rec.SetFinal(keyName(i), ex.final(keyName(i)))
	}
	ex.close()
	drv.Stop()

	if t, ok := ex.(*tenureEx); ok {
		res.FloorRaises = int(t.raised.Load())
		res.Prepares, res.PreparesHung, res.PreparesLost = int(t.prep.Prepares.Load()), int(t.prep.Hung.Load()), int(t.prep.Lost.Load())
		res.Balanced, res.BalancerMoves = t.bal != nil, int(t.moves.Load())
		h := t.hand
		res.Handovers, res.HandoversRefused = int(h.handed.Load()), int(h.refused.Load())
		h.mu.Lock()
		res.SuccessorsKilledBefore, res.KilledBeforeRefused = h.killsBefore, h.refusedKills
		res.SuccessorsKilledAfter, res.KilledAfterServed = h.killsAfter, h.servedKills
		h.mu.Unlock()
	}
	w.mu.Lock()
	res.Pauses, res.Hangs = w.pauses, w.hangs
	res.HealedAt = max(w.healedAt, w.sched.HealedAt)
	w.mu.Unlock()
	ccfg := check.Config{Linear: check.LinearConfig{Timeout: 5 * time.Second, Parallelism: 1}}
	if cfg.Strategy == Tenure || cfg.Strategy == TenureUnfenced {
		ccfg.KeyEpochs = true
		scopes := make([]string, scopes)
		for p := range scopes {
			scopes[p] = fence.PartitionScope(p)
		}
		ccfg.Liveness = &check.LivenessSpec{Scopes: scopes, From: from, Until: until,
			HealedAt: min(res.HealedAt, until), Bound: cfg.LivenessBound()}
	}
	h := w.rec.History()
	for _, wr := range h.Writes {
		if wr.Outcome == check.Rejected {
			res.Refused++
		}
	}
	report, err := check.All(h, ccfg)
	if err != nil {
		return nil, fmt.Errorf("simulation: seed %d: %w", cfg.Seed, err)
	}
	res.Report = report
	res.Wall = time.Since(wallStart)
	return res, nil
}

// waitOwned waits, on virtual time, until every partition has an owner.
func waitOwned(w *world, ex *tenureEx, limit time.Duration) {
	deadline := w.now() + limit
	for w.now() < deadline {
		owned := 0
		for _, n := range ex.nodes {
			owned += len(n.Owned())
		}
		if owned == w.cfg.Partitions {
			return
		}
		clock.Sleep(context.Background(), w.fc, 50*time.Millisecond)
	}
}

// newFakeClock returns the virtual clock of a run, at a fixed instant.
func newFakeClock() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}
