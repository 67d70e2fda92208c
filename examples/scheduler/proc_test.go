package main

import (
	"testing"

	"github.com/tenure-go/tenure/examples/internal/proctest"
)

// The process tests run the scheduler binary through examples/internal/proctest.
type (
	proc    = proctest.Proc
	logLine = proctest.LogLine
)

// wait bounds every wait for an event in the process tests.
const wait = proctest.Wait

// buildBinary builds the scheduler (with -race when the test runs with it).
func buildBinary(t *testing.T) string { return proctest.Build(t, "scheduler", raceEnabled) }

// startProc starts a scheduler with args and reads its JSON logs.
func startProc(t *testing.T, bin, id string, args ...string) *proc {
	return proctest.Start(t, bin, id, args...)
}

// waitFor polls cond until it holds (see proctest.WaitFor).
func waitFor(t *testing.T, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	proctest.WaitFor(t, what, cond, procs...)
}
