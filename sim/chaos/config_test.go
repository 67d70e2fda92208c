package chaos

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tenure-go/tenure/sim/chaos/internal/wire"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for name, c := range map[string]Config{
		"one worker":    {Workers: 1},
		"short TTL":     {TTL: time.Second},
		"few keys":      {Clients: 8, Keys: 4},
		"read ratio":    {ReadRatio: 2},
		"unknown kind":  {Kinds: []FaultKind{42}},
		"negative time": {Duration: -time.Second},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestSchedule(t *testing.T) {
	cfg := DefaultConfig().withDefaults()
	a, b := schedule(cfg), schedule(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed planned different schedules")
	}
	if len(a) != cfg.Faults {
		t.Fatalf("%d faults, want %d", len(a), cfg.Faults)
	}
	seen := make(map[FaultKind]bool)
	for i, f := range a[:len(FaultKinds())] {
		seen[f.Kind] = true
		if f.Hold <= 0 || f.At <= 0 || (i > 0 && f.At <= a[i-1].At) {
			t.Errorf("fault %d: %+v", i, f)
		}
		if (f.Kind == Pause || f.Kind == Blackhole) && f.Hold <= cfg.TTL {
			t.Errorf("fault %d holds %v, not past the TTL %v", i, f.Hold, cfg.TTL)
		}
	}
	if len(seen) != len(FaultKinds()) {
		t.Errorf("the first faults are not one of each kind: %+v", a)
	}
	cfg.Seed = 2
	if reflect.DeepEqual(a, schedule(cfg)) {
		t.Error("seeds 1 and 2 planned the same schedule")
	}
}

func TestCounter(t *testing.T) {
	c, err := wire.DecodeCounter(nil)
	if err != nil || c.N != 0 {
		t.Fatal(c, err)
	}
	for i := range 2 * wire.KeepIDs {
		c = c.Next("i"+string(rune('a'+i)), "w")
	}
	if c.N != 2*wire.KeepIDs || len(c.IDs) != wire.KeepIDs || c.Has("ia") || !c.Has("i"+string(rune('a'+2*wire.KeepIDs-1))) {
		t.Fatalf("%+v", c)
	}
	d, err := wire.DecodeCounter(c.Encode())
	if err != nil || !reflect.DeepEqual(c, d) {
		t.Fatal(d, err)
	}
	if _, err := wire.DecodeCounter([]byte("{")); err == nil {
		t.Error("a corrupt counter decoded")
	}
}
