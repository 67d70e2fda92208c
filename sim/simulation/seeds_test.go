package simulation

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// seedCounts is how many seeds TestSeeds runs of tenure and of each
// baseline: 500 and 40, or 60 and 8 under the race detector (which costs
// several times as much per run and shares CI's 20 minutes with every other
// package).
func seedCounts() (tenure, baseline int) {
	if raceEnabled {
		return 60, 8
	}
	if testing.Short() {
		return 50, 10
	}
	return 500, 40
}

// testConfig is the configuration of the seed tests: the default, with
// 15s of virtual time per run and one shape change per tenure run (a
// resize or a migration of the ring algorithm, each costing a run about
// a third more time).
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Duration = 15 * time.Second
	cfg.Reshapes = 1
	return cfg
}

// TestSeeds runs the seeds of every strategy: tenure must never break a
// checked property, and each unfenced baseline (tenure's own nodes without
// fencing among them) must be caught breaking one, which shows that the
// checkers can see what tenure prevents.
func TestSeeds(t *testing.T) {
	nTenure, nBase := seedCounts()
	start := time.Now()
	var failed []string
	var prepares, hung, lost, balanced, moves int
	var resizes, migrations, interrupted, aborted, unfinished, compared, revs, disagreements int
	var refusals []string
	var handed, refused, noHandover, before, beforeRefused, after, afterServed, paused int
	progress := func(r *Result) {
		prepares, hung, lost = prepares+r.Prepares, hung+r.PreparesHung, lost+r.PreparesLost
		if r.Config.Strategy == Tenure {
			resizes, migrations, interrupted, aborted = resizes+r.Resizes, migrations+r.Migrations, interrupted+r.Interrupted, aborted+r.Aborted
			unfinished, compared, revs, disagreements = unfinished+r.Unfinished, compared+r.Compared, revs+r.ComparedRevisions, disagreements+r.Disagreements
			refusals = append(refusals, r.Refusals...)
			handed, refused = handed+r.Handovers, refused+r.HandoversRefused
			if r.Handovers == 0 {
				noHandover++
			}
			before, beforeRefused = before+r.SuccessorsKilledBefore, beforeRefused+r.KilledBeforeRefused
			after, afterServed = after+r.SuccessorsKilledAfter, afterServed+r.KilledAfterServed
			for _, f := range r.Schedule.Faults {
				if f.Kind == KillSuccessor && f.Dur > 0 && r.SuccessorsKilledBefore+r.SuccessorsKilledAfter > 0 {
					paused++
				}
			}
		}
		if r.Balanced {
			balanced++
			moves += r.BalancerMoves
		}
		if !r.OK() && r.Config.Strategy == Tenure {
			vs := r.Report.Violations()
			vs = append(r.Disagreed, vs...)
			failed = append(failed, r.Command()+"\n    "+strings.Join(vs[:min(len(vs), 5)], "\n    "))
		}
	}
	tenure, err := RunSeeds(testConfig(), []Strategy{Tenure}, 1, nTenure, 8, progress)
	if err != nil {
		t.Fatal(err)
	}
	base, err := RunSeeds(testConfig(), []Strategy{RedisLock, EtcdMutex, TenureUnfenced}, 1, nBase, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(tenure, base...)
	var md strings.Builder
	if err := WriteMarkdown(&md, all); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tenure seeds and %d of each baseline in %v (race detector %v):\n%s", nTenure, nBase,
		time.Since(start).Round(time.Millisecond), raceEnabled, md.String())
	if dir := os.Getenv("SIM_OUT"); dir != "" {
		_ = os.WriteFile(dir+"/sim-test.md", []byte(md.String()), 0o644)
	}

	// The warm handoff is in every run: preparations, hung ones among them
	// (the moves went on cold after the warm timeout, or were called off),
	// and some cut short by their node's loss.
	t.Logf("tenure seeds: %d preparations of planned moves, %d hung, %d ended with their node's session", prepares, hung, lost)
	if prepares == 0 || hung == 0 {
		t.Errorf("the seeds prepared %d moves, %d of them hung: the sweep should cover both", prepares, hung)
	}
	// The balancer runs in a third of the seeds: its moves are planned
	// moves under the same checkers.
	t.Logf("tenure seeds: %d ran the balancer, which moved %d partitions", balanced, moves)
	if balanced == 0 || moves == 0 {
		t.Errorf("%d seeds ran the balancer, which moved %d partitions: the sweep should cover its moves", balanced, moves)
	}
	// The fleet changes its shape in every tenure seed: resizes of the
	// partition count and migrations of the ring algorithm, some of them
	// with their driver stopped mid-way and resumed or aborted by another,
	// under the same checkers; the nodes' routes and an Observer's are
	// compared whenever they are at one revision.
	t.Logf("tenure seeds: %d resizes and %d migrations of the ring algorithm completed (%d interrupted, %d of them aborted), %d unfinished at the end; nodes and an Observer compared %d times at %d revisions: %d disagreements",
		resizes, migrations, interrupted, aborted, unfinished, compared, revs, disagreements)
	if resizes == 0 || migrations == 0 || interrupted == 0 || aborted == 0 || compared == 0 {
		t.Errorf("the sweep should cover resizes (%d), migrations (%d), interrupted drivers (%d), aborts (%d) and readers compared (%d)",
			resizes, migrations, interrupted, aborted, compared)
	}
	// Planned moves hand their claims over in one transaction once the
	// fleet requires the handover feature (recorded at its first planned
	// release); a successor stopped in the middle of one: just before the
	// holder's transaction (its lease ended: etcd refuses the hand-over
	// and the holder deletes the claim) or once it committed, before the
	// successor served (the claim goes with its lease), under the same
	// checkers.
	t.Logf("tenure seeds: %d claims handed over, %d hand-overs refused, %d runs without a hand-over; successors stopped just before the hand-over's transaction %d times (%d refused), once it committed %d times (%d had served already); %d of these stops were pauses",
		handed, refused, noHandover, before, beforeRefused, after, afterServed, paused)
	if handed == 0 || refused == 0 || before == 0 || beforeRefused == 0 || after == 0 || after == afterServed {
		t.Errorf("the sweep should cover hand-overs (%d), refused ones (%d), successors stopped before the transaction (%d, %d refused) and after it, before they served (%d, %d served already)",
			handed, refused, before, beforeRefused, after, afterServed)
	}
	if len(refusals) > 0 {
		t.Errorf("shape changes refused: %v", refusals[:min(len(refusals), 5)])
	}
	tt := tenure[0]
	if tt.Runs != nTenure {
		t.Errorf("tenure: %d runs, want %d", tt.Runs, nTenure)
	}
	for _, b := range base {
		if b.Violations() == 0 {
			t.Errorf("%s: no violation in %d seeds: the checkers should see what it lacks", b.Strategy, b.Runs)
		}
	}
	if tt.FailedRuns > 0 {
		t.Errorf("tenure failed %d of %d seeds:\n  %s", tt.FailedRuns, tt.Runs, strings.Join(failed, "\n  "))
	}
}

// TestSameSeedSameSchedule: a seed fixes the fault schedule and the clock
// rates.
func TestSameSeedSameSchedule(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	a, b := NewSchedule(cfg), NewSchedule(cfg)
	if a.String() != b.String() {
		t.Fatalf("seed 7 gave two schedules:\n%s\n%s", a, b)
	}
	cfg.Seed = 8
	if c := NewSchedule(cfg); c.String() == a.String() {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	if !strings.Contains(ReplayCommand(cfg), "-seed 8 -strategy tenure") {
		t.Fatalf("replay command %q", ReplayCommand(cfg))
	}
}

// TestSkewClock: a clock running 5% fast reports 5% more elapsed time and
// fires its timers 5% sooner.
func TestSkewClock(t *testing.T) {
	fc := newFakeClock()
	c := newSkewClock(fc, 1.05)
	t0 := c.Now()
	timer := c.NewTimer(105 * time.Millisecond)
	fc.Advance(100 * time.Millisecond)
	select {
	case <-timer.Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("timer of 105ms local did not fire after 100ms at rate 1.05")
	}
	if got := c.Since(t0); got != 105*time.Millisecond {
		t.Fatalf("elapsed %v, want 105ms", got)
	}
}

// TestFloorRaisesSchedule: a tenure strategy's schedule holds
// Config.FloorRaises floor raises on partitions of the workload's keys,
// drawn apart from the other faults (which stay as they are); a baseline's
// holds none, and a negative count turns them off.
func TestFloorRaisesSchedule(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	others := func(s Schedule) (raises int, rest []Fault) {
		for _, f := range s.Faults {
			if f.Kind == RaiseFloor {
				raises++
				continue
			}
			rest = append(rest, f)
		}
		return raises, rest
	}
	keyParts := map[int]bool{}
	for k := range cfg.Keys {
		keyParts[ring.PartitionOf(keyName(k), cfg.Partitions)] = true
	}
	n, rest := others(NewSchedule(cfg))
	if n != cfg.FloorRaises {
		t.Fatalf("%d floor raises, want %d", n, cfg.FloorRaises)
	}
	for _, f := range NewSchedule(cfg).Faults {
		if f.Kind == RaiseFloor && (!keyParts[f.Partition] || f.End() > time.Duration(float64(cfg.Duration)*cfg.FaultFraction)) {
			t.Errorf("%v: not on a key's partition or past the fault window", f)
		}
	}
	cfg.FloorRaises = -1
	if n, none := others(NewSchedule(cfg)); n != 0 || !slices.Equal(none, rest) {
		t.Fatalf("without floor raises: %d raises, other faults %v, want %v", n, none, rest)
	}
	cfg.FloorRaises, cfg.Strategy = 0, RedisLock
	if n, _ := others(NewSchedule(cfg)); n != 0 {
		t.Fatalf("a baseline's schedule holds %d floor raises", n)
	}
}

// TestReshapesSchedule: a tenure strategy's schedule holds
// Config.Reshapes shape changes in time order, each resize to a count a
// power of two times the one before it (the count an aborted resize
// leaves is its start), drawn apart from the other faults; a baseline's
// holds none, and a negative count turns them off.
func TestReshapesSchedule(t *testing.T) {
	cfg := DefaultConfig()
	split := func(s Schedule) (shape, rest []Fault) {
		for _, f := range s.Faults {
			if f.Kind == Resize || f.Kind == Migrate {
				shape = append(shape, f)
				continue
			}
			rest = append(rest, f)
		}
		return shape, rest
	}
	kinds := map[FaultKind]int{}
	for seed := range uint64(40) {
		cfg.Seed, cfg.Reshapes, cfg.Strategy = seed, 0, Tenure
		shape, rest := split(NewSchedule(cfg))
		if len(shape) != cfg.withDefaults().Reshapes {
			t.Fatalf("seed %d: %d shape changes, want %d", seed, len(shape), cfg.withDefaults().Reshapes)
		}
		cur := cfg.Partitions
		for _, f := range shape {
			kinds[f.Kind]++
			if f.Abort {
				kinds[0]++
			}
			if f.Kind != Resize {
				continue
			}
			if f.To == cur || (f.To%cur != 0 && cur%f.To != 0) || !slices.Contains(reshapeCounts(cfg.Partitions), f.To) {
				t.Fatalf("seed %d: %v from %d partitions", seed, f, cur)
			}
			if !f.Abort {
				cur = f.To
			}
		}
		cfg.Reshapes = -1
		if none, others := split(NewSchedule(cfg)); len(none) != 0 || !slices.Equal(others, rest) {
			t.Fatalf("seed %d without shape changes: %v, other faults %v, want %v", seed, none, others, rest)
		}
		cfg.Reshapes, cfg.Strategy = 0, RedisLock
		if shape, _ := split(NewSchedule(cfg)); len(shape) != 0 {
			t.Fatalf("seed %d: a baseline's schedule holds %v", seed, shape)
		}
	}
	if kinds[Resize] == 0 || kinds[Migrate] == 0 || kinds[0] == 0 {
		t.Fatalf("40 seeds drew %d resizes, %d migrations, %d aborts", kinds[Resize], kinds[Migrate], kinds[0])
	}
}
