package check_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

func TestAllFencedAgainstUnfenced(t *testing.T) {
	fenced, err := check.All(lostUpdate(true, 100), check.Config{})
	mustNoErr(t, err)
	if !fenced.OK() || len(fenced.Violations()) != 0 {
		t.Errorf("fenced run: %v", fenced.Violations())
	}
	unfenced, err := check.All(lostUpdate(false, 100), check.Config{})
	mustNoErr(t, err)
	s := unfenced.Summary()
	if unfenced.Safe() || s.StaleWritesAccepted != 1 || s.LostUpdates != 1 || s.DoubleExecutions != 1 {
		t.Errorf("unfenced run: %v\n%v", s, unfenced.Violations())
	}
	if n := len(unfenced.Violations()); n != 3 {
		t.Errorf("violations %v, want 3", unfenced.Violations())
	}
}

func TestAllLivenessAndSummary(t *testing.T) {
	h := &check.History{
		Tenures: []check.Tenure{tenure("A", 1, 0, 100), tenure("B", 2, 150, -1)},
		Ops:     []check.Op{put("a", "x", "1", 0, 10, check.Accepted), get("b", "x", "", 20, 30)},
	}
	r, err := check.All(h, check.Config{Liveness: &check.LivenessSpec{Until: ms(200), HealedAt: ms(120), Bound: ms(20)}})
	mustNoErr(t, err)
	if r.OK() || r.Safe() || r.Liveness == nil || r.Liveness.OK() {
		t.Fatalf("report %+v should fail liveness and linearizability", r)
	}
	s := r.Summary()
	if s.Linearizable != "no" || s.UnownedPartitionSeconds != 0.05 || s.MaxUnownedAfterHeal != ms(30) || s.FailoverMax != ms(50) || s.Operations != 2 {
		t.Errorf("summary %v", s)
	}
	if len(s.Row()) != len(check.SummaryHeader()) {
		t.Errorf("row %v does not match header %v", s.Row(), check.SummaryHeader())
	}
	if _, err := check.All(h, check.Config{Liveness: &check.LivenessSpec{}}); err == nil {
		t.Error("an empty liveness window was accepted")
	}
	if r, err := check.All(nil, check.Config{}); err != nil || !r.OK() {
		t.Errorf("nil history: %v %v", r, err)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := check.Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if check.Percentile(nil, 50) != 0 {
		t.Error("empty percentile not zero")
	}
}

// TestViolationsAreDescribed: every kind of violation reaches
// Report.Violations with the facts needed to debug it.
func TestViolationsAreDescribed(t *testing.T) {
	h := lostUpdate(false, 100)
	h.Tenures = append(h.Tenures, tenure("C", 2, 200, -1)) // equal epoch, another holder
	h.Writes = append(h.Writes, wr(3, "C", 2, 210, 220, check.Accepted, "1", "z"))
	h.Final["k"] = "z"
	h.Ops = []check.Op{
		incr("a", "i1", 0, 10, check.Accepted), incr("b", "i1", 20, 30, check.Accepted),
		incr("b", "i2", 40, 0, check.Unknown), count("c", 3, 50, 60),
	}
	h.Final["c"] = "3"
	viz := filepath.Join(t.TempDir(), "c.html")
	r, err := check.All(h, check.Config{
		Linear:   check.LinearConfig{VisualizePath: viz},
		Liveness: &check.LivenessSpec{Scopes: []string{"p/0", "p/9"}, Until: ms(300), HealedAt: ms(250), Bound: ms(10)},
	})
	mustNoErr(t, err)
	all := strings.Join(r.Violations(), "\n")
	for _, want := range []string{
		"stale write accepted: write #2 by A",
		"double execution: p/0 epoch 2 written by B, C",
		"double execution: tenures p/0 epoch 1 held by A",
		"epoch did not increase: p/0 epoch 2 held by C",
		"lost update on \"k\"",
		"counter \"c\" counter over",
		"not linearizable: key \"c\"",
		"unowned past the bound after heal: p/9 unowned for 50ms",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("violations lack %q:\n%s", want, all)
		}
	}
	b, err := os.ReadFile(viz)
	mustNoErr(t, err)
	if !strings.Contains(string(b), `incr(1, \"i1\")`) {
		t.Errorf("counter visualization does not describe increments")
	}
}
