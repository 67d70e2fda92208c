package scale

import (
	"time"

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
	// Build is the mean time to compute one ring of Nodes members
	// (ring.New); every node pays it on every membership change,
	// so the fleet pays Nodes x Build (FleetBuild).
	Build, FleetBuild time.Duration
	// RingBytes is the heap one ring holds.
	RingBytes uint64
	// Join and Leave are the partitions a join (Nodes -> Nodes+1) and a
	// leave (Nodes -> Nodes-1) move against the ideal, over random samples.
	Join, Leave Moves
}

// Moves is the partitions moved by sampled ring changes against the ideal
// P/N (N the larger fleet).
type Moves struct {
	Samples int
	// Ideal is P/N.
	Ideal float64
	// Mean and Max are partitions moved per change.
	Mean float64
	Max  int
}

// MeanRatio is Mean / Ideal.
func (m Moves) MeanRatio() float64 { return m.Mean / m.Ideal }

// MaxRatio is Max / Ideal.
func (m Moves) MaxRatio() float64 { return float64(m.Max) / m.Ideal }
