package simulation

import (
	"testing"
)

func TestOneRun(t *testing.T) {
	for _, st := range Strategies() {
		cfg := DefaultConfig()
		cfg.Seed = 1
		cfg.Strategy = st
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: wall %v pauses %d healed %v %v", st, res.Wall, res.Pauses, res.HealedAt, res.Report.Summary())
		for _, v := range res.Report.Violations() {
			if len(v) > 300 {
				v = v[:300]
			}
			t.Log(v)
		}
		t.Log(res.Schedule)
	}
}
