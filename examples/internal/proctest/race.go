//go:build race

package proctest

// RaceEnabled reports whether the tests run with the race detector: Build
// then builds the binary with -race too.
const RaceEnabled = true
