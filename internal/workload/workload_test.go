package workload

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestRunNCallsEachNumberOnce(t *testing.T) {
	var mu sync.Mutex
	seen := make(map[int]int)
	workers := make(map[int]bool)
	if err := RunN(4, 100, func(w, i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[i]++
		workers[w] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct calls, want 100", len(seen))
	}
	for i, n := range seen {
		if i < 0 || i >= 100 || n != 1 {
			t.Fatalf("call %d made %d times", i, n)
		}
	}
	for w := range workers {
		if w < 0 || w >= 4 {
			t.Fatalf("worker %d out of range", w)
		}
	}
}

func TestRunForCountsCompletedCalls(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	n, err := RunFor(20*time.Millisecond, 3, func(int, int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n != calls {
		t.Fatalf("RunFor reported %d calls, op saw %d", n, calls)
	}
}

func TestErrorsStopTheirWorkerAndAreJoined(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	after := 0 // calls made by the failing worker after its error
	failed := -1
	err := RunN(2, 1000, func(w, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if w == failed {
			after++
		}
		if i == 3 {
			failed = w
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if after != 0 {
		t.Fatalf("the failing worker made %d calls after its error", after)
	}
	n, err := RunFor(time.Hour, 2, func(int, int) error { return boom })
	if !errors.Is(err, boom) || n != 0 {
		t.Fatalf("RunFor = %d, %v; want 0, boom (every worker stops at its error)", n, err)
	}
}

func TestRotationStartsEachRoundWithTheNextWay(t *testing.T) {
	var runs []string // the ways in the order they ran, one entry per run
	way := func(name string, per int) Way {
		return Way{Name: name, Workers: 1, Per: per, Op: func(int, int) error {
			if len(runs) == 0 || runs[len(runs)-1] != name {
				runs = append(runs, name)
			}
			time.Sleep(time.Millisecond)
			return nil
		}}
	}
	r := Rotation{Ways: []Way{way("a", 1), way("b", 10)}}
	for range 2 {
		if err := r.Round(5 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// Round 0 runs a then b; round 1 starts with b, so b runs twice in a row.
	if fmt.Sprint(runs) != "[a b a]" {
		t.Fatalf("ways ran in the order %v, want [a b a]", runs)
	}
	if a, b := r.PerSecond(0), r.PerSecond(1); a <= 0 || b <= 5*a {
		t.Fatalf("per second: a %.0f, b %.0f (b does 10 units a call)", a, b)
	}
	boom := errors.New("boom")
	r = Rotation{Ways: []Way{{Name: "x", Workers: 1, Per: 1, Op: func(int, int) error { return boom }}}}
	if err := r.Round(time.Millisecond); !errors.Is(err, boom) {
		t.Fatalf("Round = %v, want boom", err)
	}
}
