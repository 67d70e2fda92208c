//go:build !featurelevel_prev

package fleetview

// buildFeatures returns every protocol feature, sorted: this build's.
func buildFeatures() []string {
	return []string{FeatureAlgorithmMigration, FeatureHandover, FeaturePlacements, FeatureResize, FeatureWeightedRing}
}
