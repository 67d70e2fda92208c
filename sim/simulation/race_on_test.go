//go:build race

package simulation

// raceEnabled: under the race detector every run costs several times as
// much, so the seed tests run fewer seeds (see seeds_test.go).
const raceEnabled = true
