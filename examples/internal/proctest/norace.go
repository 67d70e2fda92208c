//go:build !race

package proctest

// RaceEnabled reports whether the tests run with the race detector.
const RaceEnabled = false
