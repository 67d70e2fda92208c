package simulation

import "testing"

// TestSuccessorKills: a tenure schedule holds Config.SuccessorKills
// KillSuccessor faults, before and after the hand-over's transaction,
// kills and pauses among them, and only pauses beside a Crash (at most
// one node dies); a baseline's schedule holds none.
func TestSuccessorKills(t *testing.T) {
	var before, after, kills, pauses int
	for seed := uint64(1); seed <= 60; seed++ {
		cfg := DefaultConfig()
		cfg.Seed = seed
		s := NewSchedule(cfg)
		n, crash := 0, false
		var kill Fault
		for _, f := range s.Faults {
			switch f.Kind {
			case KillSuccessor:
				n++
				kill = f
			case Crash:
				crash = true
			}
		}
		if n != 1 {
			t.Fatalf("seed %d: %d successor kills, want 1:\n%s", seed, n, s)
		}
		if crash && kill.Dur == 0 {
			t.Fatalf("seed %d: a successor killed beside a crash:\n%s", seed, s)
		}
		if kill.Before {
			before++
		} else {
			after++
		}
		if kill.Dur == 0 {
			kills++
		} else {
			pauses++
		}
		cfg.SuccessorKills = -1
		for _, f := range NewSchedule(cfg).Faults {
			if f.Kind == KillSuccessor {
				t.Fatalf("seed %d: a successor kill with SuccessorKills -1", seed)
			}
		}
		cfg.SuccessorKills, cfg.Strategy = 0, RedisLock
		for _, f := range NewSchedule(cfg).Faults {
			if f.Kind == KillSuccessor {
				t.Fatalf("seed %d: a successor kill in a baseline's schedule", seed)
			}
		}
	}
	if before == 0 || after == 0 || kills == 0 || pauses == 0 {
		t.Fatalf("60 seeds: %d before, %d after, %d kills, %d pauses: want each", before, after, kills, pauses)
	}
}
