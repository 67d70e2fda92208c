package simulation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// FaultKind is the kind of a Fault.
type FaultKind uint8

// The faults.
const (
	// Pause: the next operation node Node runs after At holds its token,
	// reads, then its process stalls for Dur (its etcd client is cut off
	// meanwhile, renewals included) before it writes.
	Pause FaultKind = iota + 1
	// Crash: node Node's etcd client is cut forever at At; its goroutines
	// are abandoned.
	Crash
	// Partition: node Node's etcd client is cut off for Dur.
	Partition
	// Latency: every request of node Node takes Latency each way for Dur.
	Latency
	// LoseResponses: the next N responses to node Node are lost (applied,
	// but the caller cannot know).
	LoseResponses
	// LeaderChange: etcd has no leader for Dur, then elects one (every lease
	// countdown restarts).
	LeaderChange
	// HangRelease: node Node's next release callback after At hangs for
	// Dur.
	HangRelease
	// DropWatches: node Node's watch streams break at At.
	DropWatches
	// Compact: etcd compacts its history up to its current revision at At.
	Compact
	// RaiseFloor: at At, someone outside the fleet (an operator shutting
	// out a zombie with etcdctl, a script, a process of another build)
	// raises the fence floor of partition Partition: a Put of the floor key
	// in the store's 19-digit encoding, to etcd's current revision, above
	// the epoch of every tenure of the partition so far, the live owner's
	// included. Dur later it deletes the claim it saw (a force release), so
	// that the partition moves on at an epoch above the floor. Only the
	// tenure strategies, whose floors these are, get it; their schedules
	// hold Config.FloorRaises of them beside Faults.
	RaiseFloor
	// Resize: at At, an operator resizes the fleet's partition count to To
	// with fleet.Operator.Resize, moving at most N groups at once. With Dur
	// set, the driver's context ends Dur after it started, and a second
	// driver in another process then aborts the resize (Abort) or resumes
	// it. Shape changes run one after the other: one due while another
	// runs waits for it. Only the tenure strategies get them; their
	// schedules hold Config.Reshapes shape changes beside Faults.
	Resize
	// Migrate: at At, an operator migrates the fleet's ring algorithm to
	// the other one (weighted to bounded, bounded to weighted) with
	// fleet.Operator.MigrateAlgorithm, N partitions a step; Dur and Abort
	// as for a Resize.
	Migrate
	// KillSuccessor: from At, the next hand-over of a claim to a live node
	// (a planned move's last transaction) has its successor stopped: just
	// before etcd applies the holder's transaction if Before (its lease
	// revoked too, so that etcd refuses the hand-over and the holder
	// deletes the claim), else just after etcd committed it, before the
	// successor can have served the partition (its lease runs out a TTL
	// later, taking the claim with it). With Dur zero the successor is
	// killed, as by a Crash; otherwise its process pauses for Dur. Only
	// the tenure strategies get them; their schedules hold
	// Config.SuccessorKills of them beside Faults.
	KillSuccessor
)

var faultNames = map[FaultKind]string{
	Pause: "pause", Crash: "crash", Partition: "partition", Latency: "latency",
	LoseResponses: "lose-responses", LeaderChange: "leader-change", HangRelease: "hang-release",
	DropWatches: "drop-watches", Compact: "compact", RaiseFloor: "raise-floor",
	Resize: "resize", Migrate: "migrate", KillSuccessor: "kill-successor",
}

func (k FaultKind) String() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return fmt.Sprintf("fault(%d)", uint8(k))
}

// Fault is one entry of a fault schedule.
type Fault struct {
	Kind      FaultKind
	At, Dur   time.Duration
	Node      int
	Latency   time.Duration
	N         int
	Partition int  // of a RaiseFloor
	To        int  // of a Resize: the partition count
	Abort     bool // of an interrupted Resize or Migrate
	Before    bool // of a KillSuccessor: before the hand-over's transaction
}

// End is when the fault is over (for a crash: when it happened).
func (f Fault) End() time.Duration { return f.At + f.Dur }

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", f.At, f.Kind)
	switch f.Kind {
	case LeaderChange, Compact:
	case RaiseFloor:
		fmt.Fprintf(&b, " p/%d", f.Partition)
	case KillSuccessor:
		when, what := "after", "killed"
		if f.Before {
			when = "before"
		}
		if f.Dur > 0 {
			what = "paused for " + f.Dur.String()
		}
		fmt.Fprintf(&b, " %s the next hand-over's transaction: %s", when, what)
		return b.String()
	case Resize, Migrate:
		if f.Kind == Resize {
			fmt.Fprintf(&b, " to %d", f.To)
		}
		fmt.Fprintf(&b, " budget %d", f.N)
		if f.Dur > 0 {
			then := "resumed"
			if f.Abort {
				then = "aborted"
			}
			fmt.Fprintf(&b, " driver stopped after %v, %s by another", f.Dur, then)
		}
		return b.String()
	default:
		fmt.Fprintf(&b, " n%d", f.Node+1)
	}
	if f.Dur > 0 {
		fmt.Fprintf(&b, " for %v", f.Dur)
	}
	if f.Latency > 0 {
		fmt.Fprintf(&b, " latency %v", f.Latency)
	}
	if f.N > 0 {
		fmt.Fprintf(&b, " n=%d", f.N)
	}
	return b.String()
}

// Schedule is a run's seeded fault schedule and clock rates.
type Schedule struct {
	Faults []Fault
	// Rates are the nodes' clock rates (1.03: 3% fast).
	Rates []float64
	// HealedAt is when the last fault is over.
	HealedAt time.Duration
}

func (s Schedule) String() string {
	var b strings.Builder
	for i, r := range s.Rates {
		fmt.Fprintf(&b, "n%d clock rate %.3f\n", i+1, r)
	}
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "healed at %v\n", s.HealedAt)
	return b.String()
}

// NewSchedule derives the fault schedule of cfg.Seed. Faults start after
// one TTL of warm-up and end by FaultFraction of the run; at most one node
// crashes, so that a majority of the fleet survives. The floor raises of
// the tenure strategies come from a random stream of their own, so that
// they leave the other faults of a seed as they are.
func NewSchedule(cfg Config) Schedule {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	s := Schedule{Rates: make([]float64, cfg.Nodes)}
	for i := range s.Rates {
		s.Rates[i] = 1 + (rng.Float64()*2-1)*cfg.MaxSkew
	}
	window := time.Duration(float64(cfg.Duration) * cfg.FaultFraction)
	ttl := cfg.TTL
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
	}
	crashed := false
	kinds := []FaultKind{Pause, Pause, Pause, Crash, Partition, Partition, Latency, LoseResponses, LoseResponses,
		LeaderChange, HangRelease, DropWatches, Compact}
	for range cfg.Faults {
		k := kinds[rng.IntN(len(kinds))]
		if k == Crash && crashed {
			k = Pause
		}
		f := Fault{Kind: k, Node: rng.IntN(cfg.Nodes), At: dur(ttl, window-ttl)}
		switch k {
		case Pause:
			f.Dur = dur(0, 5*ttl)
		case Crash:
			crashed = true
		case Partition:
			f.Dur = dur(ttl/10, 3*ttl)
		case Latency:
			f.Dur = dur(ttl/2, 2*ttl)
			f.Latency = dur(5*time.Millisecond, ttl/5)
		case LoseResponses:
			f.N = 1 + rng.IntN(3)
		case LeaderChange:
			f.Dur = dur(0, time.Second)
		case HangRelease:
			f.Dur = dur(ttl, 3*ttl)
		}
		// Everything ends inside the fault window.
		if f.End() > window {
			f.Dur = max(0, window-f.At)
		}
		s.Faults = append(s.Faults, f)
	}
	if cfg.Strategy == Tenure || cfg.Strategy == TenureUnfenced {
		s.Faults = append(s.Faults, floorRaises(cfg, window)...)
		s.Faults = append(s.Faults, reshapes(cfg, window)...)
		s.Faults = append(s.Faults, successorKills(cfg, window, crashed)...)
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	for _, f := range s.Faults {
		s.HealedAt = max(s.HealedAt, f.End())
	}
	return s
}

// floorRaises draws cfg.FloorRaises RaiseFloor faults within window: at
// times between one TTL and window less a TTL, each on the partition of a
// key of the workload, releasing the claim up to a TTL after its raise.
func floorRaises(cfg Config, window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xf1002))
	ttl := cfg.TTL
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
	}
	var out []Fault
	for range max(cfg.FloorRaises, 0) {
		f := Fault{Kind: RaiseFloor, At: dur(ttl, window-ttl), Dur: dur(0, ttl),
			Partition: ring.PartitionOf(keyName(rng.IntN(cfg.Keys)), cfg.Partitions)}
		f.Dur = min(f.Dur, max(0, window-f.At))
		out = append(out, f)
	}
	return out
}

// successorKills draws cfg.SuccessorKills KillSuccessor faults, armed at
// times between one TTL and half the window, half of them before the
// hand-over's transaction; one in three pauses the successor for half a
// TTL to three TTLs instead of killing it, and all do in a schedule that
// holds a Crash already (at most one node dies).
func successorKills(cfg Config, window time.Duration, crashed bool) []Fault {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5cc))
	ttl := cfg.TTL
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
	}
	var out []Fault
	for range max(cfg.SuccessorKills, 0) {
		f := Fault{Kind: KillSuccessor, At: dur(ttl, max(ttl, window/2)), Before: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 || crashed {
			f.Dur = dur(ttl/2, 3*ttl)
		}
		crashed = crashed || f.Dur == 0
		out = append(out, f)
	}
	return out
}
