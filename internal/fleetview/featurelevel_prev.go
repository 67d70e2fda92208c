//go:build featurelevel_prev

package fleetview

// buildFeatures returns the protocol features of the feature level before
// placements: the weighted ring only. Building with the tag
// featurelevel_prev makes a binary of that level (a node that
// publishes these features and is refused by a fleet that uses more),
// so that a test can run an older build beside this one and upgrade from
// it (router's TestRollingUpgradeBuilds).
func buildFeatures() []string { return []string{FeatureWeightedRing} }
