//go:build !race

package doccheck

// raceEnabled reports whether this test binary was built with -race.
const raceEnabled = false
