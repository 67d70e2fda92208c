package check_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

func TestLiveness(t *testing.T) {
	p1 := func(holder string, epoch int64, start, end int) check.Tenure {
		tn := tenure(holder, epoch, start, end)
		tn.Scope = "p/1"
		return tn
	}
	tests := []struct {
		name       string
		tenures    []check.Tenure
		spec       check.LivenessSpec
		unowned    time.Duration
		maxAfter   time.Duration
		violations int
	}{
		{
			name:    "always owned",
			tenures: []check.Tenure{tenure("A", 1, 0, 50), tenure("B", 2, 50, -1)},
			spec:    check.LivenessSpec{Until: ms(100), HealedAt: ms(10), Bound: 0},
		},
		{
			name:    "gap during the fault only",
			tenures: []check.Tenure{tenure("A", 1, 0, 20), tenure("B", 2, 50, -1)},
			spec:    check.LivenessSpec{Until: ms(100), HealedAt: ms(60), Bound: 0},
			unowned: ms(30),
		},
		{
			name:     "owned again within the bound after heal",
			tenures:  []check.Tenure{tenure("A", 1, 0, 100), tenure("B", 2, 150, -1)},
			spec:     check.LivenessSpec{Until: ms(200), HealedAt: ms(120), Bound: ms(40)},
			unowned:  ms(50),
			maxAfter: ms(30),
		},
		{
			name:       "unowned past the bound after heal",
			tenures:    []check.Tenure{tenure("A", 1, 0, 100), tenure("B", 2, 150, -1)},
			spec:       check.LivenessSpec{Until: ms(200), HealedAt: ms(120), Bound: ms(20)},
			unowned:    ms(50),
			maxAfter:   ms(30),
			violations: 1,
		},
		{
			name:       "a scope never owned",
			tenures:    []check.Tenure{tenure("A", 1, 0, -1)},
			spec:       check.LivenessSpec{Scopes: []string{"p/0", "p/1"}, Until: ms(100), HealedAt: ms(50), Bound: ms(10)},
			unowned:    ms(100),
			maxAfter:   ms(50),
			violations: 1,
		},
		{
			name:     "overlapping tenures and a planned handoff gap",
			tenures:  []check.Tenure{tenure("A", 1, 0, 60), tenure("B", 2, 40, 80), tenure("C", 3, 81, -1), p1("A", 1, 0, -1)},
			spec:     check.LivenessSpec{Until: ms(100), HealedAt: 0, Bound: ms(5)},
			unowned:  ms(1),
			maxAfter: ms(1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.Liveness(&check.History{Tenures: tt.tenures}, tt.spec)
			mustNoErr(t, err)
			if res.Unowned != tt.unowned || res.MaxGapAfterHeal != tt.maxAfter || len(res.Violations) != tt.violations || res.OK() != (tt.violations == 0) {
				t.Errorf("got unowned %v, max after heal %v, violations %v; want %v, %v, %d",
					res.Unowned, res.MaxGapAfterHeal, res.Violations, tt.unowned, tt.maxAfter, tt.violations)
			}
		})
	}
	if _, err := check.Liveness(nil, check.LivenessSpec{From: ms(10), Until: ms(5)}); !errors.Is(err, check.ErrInvalidConfig) {
		t.Error("a window that ends before it begins was accepted")
	}
}

func TestFailovers(t *testing.T) {
	h := &check.History{Tenures: []check.Tenure{
		tenure("A", 1, 0, 100), tenure("B", 2, 1100, 2000), tenure("C", 3, 1990, 3000), tenure("D", 4, 3005, -1),
	}}
	got := check.Failovers(h)
	want := []time.Duration{ms(1000), 0, ms(5)}
	if len(got) != len(want) {
		t.Fatalf("failovers %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("failovers %v, want %v", got, want)
		}
	}
}
