package fleetview

import (
	"runtime/debug"
	"slices"
	"sync"
)

// The protocol features a build of tenure may understand: the one home of
// their names. A member publishes those its build understands
// (keys.Member.Features); a member that publishes none understands the
// base protocol only (claims and drain marks), as a build from before
// features were published does. The fleet's spec records the features in
// use (its requires), and a build that lacks one of them is refused at
// Join.
const (
	// FeaturePlacements is the placement keys: an operator's pins and the
	// balancer's moves.
	FeaturePlacements = "placements"
	// FeatureWeightedRing is the weighted ring algorithm
	// (ring.AlgorithmWeighted).
	FeatureWeightedRing = "weighted_ring"
	// FeatureResize is an online change of the partition count.
	FeatureResize = "resize"
	// FeatureAlgorithmMigration is an online change of the ring algorithm:
	// migration placements, a spec whose algorithm changes while nodes
	// run, and the balancer paused meanwhile.
	FeatureAlgorithmMigration = "algorithm_migration"
	// FeatureHandover is the hand-over of a claim by its holder to the next
	// owner in one transaction, and the claim's epoch read as its
	// ModRevision (keys.ClaimEpoch): a build without it reads a claim's
	// epoch as its CreateRevision, which a hand-over leaves behind.
	FeatureHandover = "handover"
)

// Features returns the protocol features of this build, sorted: all of
// the above, or, in a build with the tag featurelevel_prev, those
// of the feature level before placements (featurelevel_prev.go).
func Features() []string { return buildFeatures() }

// Build returns this build's version: the main module's version as the Go
// toolchain recorded it, or "devel" if it recorded none.
var Build = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == modulePath && d.Version != "" {
				return d.Version
			}
		}
		if bi.Main.Path == modulePath && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "devel"
})

// modulePath is tenure's module path.
const modulePath = "github.com/tenure-go/tenure"

// Has reports whether the sorted or unsorted feature list set holds name.
func Has(set []string, name string) bool { return slices.Contains(set, name) }

// Lacking returns the features of want that have lacks, in want's order.
func Lacking(have, want []string) []string {
	var out []string
	for _, f := range want {
		if !Has(have, f) {
			out = append(out, f)
		}
	}
	return out
}

// Intersect returns the features every one of sets holds, sorted; nil
// for no sets.
func Intersect(sets ...[]string) []string {
	if len(sets) == 0 {
		return nil
	}
	out := slices.Clone(sets[0])
	for _, s := range sets[1:] {
		out = slices.DeleteFunc(out, func(f string) bool { return !Has(s, f) })
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withFeature returns the sorted set of requires with name added.
func withFeature(requires []string, name string) []string {
	if Has(requires, name) {
		return requires
	}
	out := append(slices.Clone(requires), name)
	slices.Sort(out)
	return out
}
