//go:build unix

package chaos

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

// TestChaos is a short chaos run with one fault of each kind: real worker
// processes, a 3-member etcd of processes, SIGSTOP, SIGKILL, a killed and a
// frozen etcd leader, a blackholed link. No stale write may be accepted and
// every acknowledged increment must be counted once.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about 30s")
	}
	cfg := DefaultConfig()
	cfg.Duration = 20 * time.Second
	cfg.Workers = 3
	cfg.Clients = 4
	cfg.Keys = 16
	cfg.Partitions = 32
	cfg.Faults = len(FaultKinds())
	cfg.Progress = tlog{t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var md bytes.Buffer
	r, err := Run(ctx, cfg, &md)
	t.Logf("report:\n%s", md.String())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.Summary.StaleWritesAccepted != 0 || r.Summary.LostUpdates != 0 || r.Summary.DoubleExecutions != 0 {
		t.Errorf("summary %v", r.Summary)
	}
	for _, k := range FaultKinds() {
		if r.FaultCounts[k] != 1 {
			t.Errorf("%d faults of kind %v, want 1 (%v)", r.FaultCounts[k], k, r.Faults)
		}
	}
	if r.Acked == 0 || r.Check.Lost.Acknowledged == 0 {
		t.Errorf("%d increments acknowledged, %d updates checked: the run checked nothing", r.Acked, r.Check.Lost.Acknowledged)
	}
	// A worker paused between its read and its write past the TTL has
	// lost the partition: only the fence stops its write, and must.
	if r.PausedRefused != len(r.PausedWrites) {
		t.Errorf("writes held across a pause: %v, want every one refused stale", r.PausedWrites)
	}
	if len(r.Failovers) == 0 {
		t.Errorf("no failover measured")
	}
	t.Logf("%d increments acknowledged, each counted once; %d writes refused stale (%d of them held across a pause), 0 accepted; failover p50 %v, p99 %v, max %v (%d partitions); handoff p50 %v, p99 %v",
		r.Acked, r.Stale, r.PausedRefused, check.Percentile(r.Failovers, 50), check.Percentile(r.Failovers, 99), check.Percentile(r.Failovers, 100), len(r.Failovers),
		check.Percentile(r.Handoffs, 50), check.Percentile(r.Handoffs, 99))
}

// tlog writes progress lines to the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
