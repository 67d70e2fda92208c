package scale

import (
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// Report holds the figures of a run.
type Report struct {
	// Config is the configuration the run used, defaults filled in.
	Config Config
	// Live holds the live fleet's figures; nil if Config.RingOnly.
	Live *LiveReport
	// Ring holds the ring-only figures; nil if Config.SkipRing.
	Ring *RingReport
	// Placement holds the placement figures; nil unless Config.Placement.
	Placement *PlacementReport
	// Wall is the wall time of the whole run.
	Wall time.Duration
}

// LiveReport holds the figures of the live fleet.
type LiveReport struct {
	// Nodes and Partitions are the fleet's size.
	Nodes, Partitions int
	// BringUp is the fleet's start with parked claims (see the package
	// documentation): not one of the measured phases.
	BringUp Phase
	// Phases are join, leave, crash and rolling restart, in that order.
	Phases []Phase
	// HeapBefore is the heap in use (runtime.MemStats.HeapInuse after a
	// GC) with memetcd and the parked claims but no node; HeapFleet with
	// the fleet up and stable (memetcd's history compacted).
	HeapBefore, HeapFleet uint64
	// HeapPerNode is (HeapFleet - HeapBefore) / Nodes: what one node holds,
	// its share of memetcd's watchers and sessions included.
	HeapPerNode uint64
	// GoroutinesPerNode is the goroutines of the stable fleet, less those
	// before the first node, per node.
	GoroutinesPerNode float64
}

// Phase holds the figures of one phase: one or more membership changes,
// each followed by a wait for a stable ring.
type Phase struct {
	// Name is "bring-up", "join", "leave", "crash" or "rolling restart".
	Name string
	// Changes is the number of membership changes (a restart is two: a
	// leave and a join).
	Changes int
	// Etcd is the fleet's etcd traffic over the phase (the driver's own
	// excluded; lease expiries count in Revisions).
	Etcd memetcd.Stats
	// Virtual is the virtual time from each change to a stable ring,
	// summed over the changes; MaxVirtual the longest of one change.
	Virtual, MaxVirtual time.Duration
	// Wall is the wall time of the phase on this machine; MaxWall the
	// longest wait for one change.
	Wall, MaxWall time.Duration
	// Steps is how many times the driver advanced the virtual clock.
	Steps int
	// Moved is the number of partitions whose owner changed between
	// consecutive rings (diffRings), summed over the changes.
	Moved int
	// Acquired is the number of OnAcquired callbacks in the phase: the
	// moves that really happened.
	Acquired int64
	// Ideal is the sum over the changes of P/N, N the fleet's size with
	// the node that came or went: the share of that node.
	Ideal float64
}

// MoveRatio is Moved / Ideal (0 without an ideal).
func (p Phase) MoveRatio() float64 {
	if p.Ideal == 0 {
		return 0
	}
	return float64(p.Moved) / p.Ideal
}

// RingReport holds the ring-only figures.
type RingReport struct {
	// Nodes and Partitions are the rings' size.
	Nodes, Partitions int
	// Heavy is Config.RingHeavy: every Heavy-th node and joiner has
	// weight 2 (none if 0).
	Heavy int
	// RuleFigures are the figures of Config.RingAlgorithm.
	RuleFigures
	// Rules holds the figures of each ring algorithm computed, on the same
	// samples: Config.RingAlgorithm's alone, or with Config.RingBoth
	// AlgorithmBounded's and AlgorithmWeighted's, in that order.
	Rules []RuleFigures
}

// Rule returns the figures of ring algorithm alg (zero if absent).
func (r *RingReport) Rule(alg ring.Algorithm) RuleFigures {
	for _, f := range r.Rules {
		if f.Algorithm == alg {
			return f
		}
	}
	return RuleFigures{}
}

// RuleFigures holds one ring algorithm's ring-only figures.
type RuleFigures struct {
	// Algorithm is the ring algorithm (ring.AlgorithmBounded or
	// ring.AlgorithmWeighted).
	Algorithm ring.Algorithm
	// Build is the mean time to compute one ring of Nodes members
	// (ring.NewWeighted); every node pays it on every membership change,
	// so the fleet pays Nodes x Build (FleetBuild).
	Build, FleetBuild time.Duration
	// RingBytes is the heap one ring holds.
	RingBytes uint64
	// Join and Leave are the partitions a join (Nodes -> Nodes+1) and a
	// leave (Nodes -> Nodes-1) move against the ideal, over random samples.
	Join, Leave Moves
}

// Moves is the partitions moved by sampled ring changes against the
// ideal: P times the ring weight of the member that came or went over the
// ring's total weight with it (P/N when every weight is 1, as
// AlgorithmBounded makes them).
type Moves struct {
	Samples int
	// Ideal is the mean ideal per change.
	Ideal float64
	// Mean and Max are partitions moved per change.
	Mean float64
	Max  int
	// MaxRatio is the largest moved/ideal of one change.
	MaxRatio float64
}

// MeanRatio is Mean / Ideal: all the partitions moved over all the ideal.
func (m Moves) MeanRatio() float64 { return m.Mean / m.Ideal }

// PlacementReport holds the placement figures (see PlacementFigures).
type PlacementReport struct {
	// Nodes and Partitions are the fleet's size; every Heavy-th node has
	// weight 2 (none if 0); Model is the load model and Keys the number
	// of keys of LoadZipf.
	Nodes, Partitions, Heavy, Keys int
	Model                          string
	// LowerBound is the heaviest partition's load over the mean load per
	// weight, over the largest weight (a member of weight 2 may hold it
	// at half its load per weight): no placement's imbalance can be below
	// it.
	LowerBound float64
	// Aligned and Spread are the load reports' etcd writes per second,
	// nodes joined at once or spread over the report interval; the Peak
	// fields are the most written in one second.
	Aligned, Spread         float64
	AlignedPeak, SpreadPeak int
	// Plan is the mean time of balance.Plan over the fleet; FirstMoves
	// and Before are its first pass's moves and imbalance.
	Plan       time.Duration
	FirstMoves int
	Before     float64
	// Passes, Moves and MaxMoves are the passes with moves until a pass
	// moves nothing, their moves, and the most moves of one pass; After
	// is the imbalance then.
	Passes, Moves, MaxMoves int
	After                   float64
	// PlanDuplicates counts the moves of those passes that move a
	// partition the same pass already moved; Duplicates counts those of
	// the Balancer's pass, which etcd refuses to apply as planned (one
	// key put twice in a transaction), so the figures apply each
	// partition's last move.
	PlanDuplicates, Duplicates int
	// BalancerPlan and BalancerApply are the times of a Balancer's Plan
	// (reads included) and Apply against the in-memory etcd;
	// ApplyWrites and ApplyMoves are Apply's etcd writes and the moves
	// they carried.
	BalancerPlan, BalancerApply time.Duration
	ApplyWrites                 int64
	ApplyMoves                  int
}
