// Package workload runs a benchmark's operations on concurrent workers, for
// a fixed time (RunFor) or a fixed count (RunN), so that the benchmarks that
// compare ways of writing load them alike.
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
	var next, done atomic.Int64
	deadline := time.Now().Add(d)
	return run(workers, op, &done, func() (int, bool) {
		if !time.Now().Before(deadline) {
			return 0, false
		}
		return int(next.Add(1) - 1), true
	})
}

// RunN makes n calls of op on workers goroutines; i numbers them from 0. A
// worker stops at its first error; the errors are joined.
func RunN(workers, n int, op func(worker, i int) error) error {
	var next, done atomic.Int64
	_, err := run(workers, op, &done, func() (int, bool) {
		i := int(next.Add(1) - 1)
		return i, i < n
	})
	return err
}

// run runs workers goroutines that call op for each call number that take
// gives them, until it gives none, and counts the completed calls in done.
func run(workers int, op func(worker, i int) error, done *atomic.Int64, take func() (int, bool)) (int, error) {
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
