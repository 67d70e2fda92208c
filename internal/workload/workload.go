// Package workload runs a benchmark's operations on concurrent workers, for
// a fixed time (RunFor) or a fixed count (RunN), so that the benchmarks that
// compare ways of writing load them alike, and compares ways in timed rounds
// that rotate which goes first (Rotation).
package workload

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// RunFor calls op on workers goroutines until d has passed and returns how
// many calls completed. i numbers the calls from 0 across the workers. A
// worker starts no call after d; the calls running at d complete and count,
// so that a worker that waits on the others (a group commit) is measured in
// its steady state, without the ramp and drain of a fixed count. A worker
// stops at its first error; the errors are joined.
func RunFor(d time.Duration, workers int, op func(worker, i int) error) (int, error) {
	var next atomic.Int64
	deadline := time.Now().Add(d)
	return run(workers, op, func() (int, bool) {
		if !time.Now().Before(deadline) {
			return 0, false
		}
		return int(next.Add(1) - 1), true
	})
}

// RunN makes n calls of op on workers goroutines; i numbers them from 0. A
// worker stops at its first error; the errors are joined.
func RunN(workers, n int, op func(worker, i int) error) error {
	var next atomic.Int64
	_, err := run(workers, op, func() (int, bool) {
		i := int(next.Add(1) - 1)
		return i, i < n
	})
	return err
}

// run runs workers goroutines that call op for each call number that take
// gives them, until it gives none, and returns how many calls completed.
func run(workers int, op func(worker, i int) error, take func() (int, bool)) (int, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := op(w, i); err != nil {
					errs[w] = err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), errors.Join(errs...)
}

// Way is one way of doing a benchmark's work: Op called on Workers
// goroutines (as RunFor calls it), each call doing Per units of work
// (writes, say).
type Way struct {
	Name    string
	Workers int
	Per     int
	Op      func(worker, i int) error
}

// Rotation compares Ways in timed rounds. Each Round runs every way for the
// same time, one after another, starting with the next way each round, so
// that a noisy machine slows all alike; the Rotation adds up the units each
// way did and the time it took.
type Rotation struct {
	Ways []Way

	rounds int
	spent  []time.Duration
	units  []int
}

// Round runs every way once for d (see RunFor), and returns the first
// error.
func (r *Rotation) Round(d time.Duration) error {
	if r.spent == nil {
		r.spent, r.units = make([]time.Duration, len(r.Ways)), make([]int, len(r.Ways))
	}
	for j := range r.Ways {
		k := (r.rounds + j) % len(r.Ways)
		start := time.Now()
		calls, err := RunFor(d, r.Ways[k].Workers, r.Ways[k].Op)
		if err != nil {
			return err
		}
		r.spent[k] += time.Since(start)
		r.units[k] += calls * r.Ways[k].Per
	}
	r.rounds++
	return nil
}

// PerSecond is the units per second way k did over the rounds so far.
func (r *Rotation) PerSecond(k int) float64 {
	if r.spent == nil || r.spent[k] == 0 {
		return 0
	}
	return float64(r.units[k]) / r.spent[k].Seconds()
}
