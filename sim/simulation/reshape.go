package simulation

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// reshapeCounts are the partition counts a Resize of a run of p
// partitions moves between, each a power of two times another: p/2 (for
// an even p), p and 2p (8, 16 and 32 for the default 16; more partitions
// cost the sweep time for no other kind of move).
func reshapeCounts(p int) []int {
	if p%2 == 0 {
		return []int{p / 2, p, 2 * p}
	}
	return []int{p, 2 * p}
}

// reshapes draws cfg.Reshapes shape changes within window, from a random
// stream of their own, in the order of their times: two in three resize the partition count to another
// of reshapeCounts (the count each leaves is the next one's start), one in
// three migrates the ring algorithm to the other one; half of them have
// their driver's context end Dur after it started (50ms to 1s), and half
// of those are then aborted by a second driver, the others resumed by it.
// N is the budget: groups of a resize, partitions of a migration's step.
func reshapes(cfg Config, window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5a9e))
	ttl := cfg.TTL
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
	}
	at := make([]time.Duration, max(cfg.Reshapes, 0))
	for i := range at {
		at[i] = dur(ttl, window-ttl)
	}
	slices.Sort(at)
	cur := cfg.Partitions
	var out []Fault
	for _, t := range at {
		f := Fault{Kind: Migrate, At: t, N: 2 + rng.IntN(7)}
		if rng.IntN(3) < 2 {
			f.Kind = Resize
			var to []int
			for _, c := range reshapeCounts(cfg.Partitions) {
				if c != cur && (c%cur == 0 || cur%c == 0) {
					to = append(to, c)
				}
			}
			f.To = to[rng.IntN(len(to))]
		}
		if rng.IntN(2) == 0 {
			f.Dur = dur(50*time.Millisecond, time.Second)
			f.Abort = rng.IntN(2) == 0
		}
		if f.Kind == Resize && !f.Abort {
			cur = f.To
		}
		out = append(out, f)
	}
	return out
}

// reshaper runs the schedule's Resize and Migrate entries one after the
// other, each with the real fleet.Operator, as an operator would with
// tenurectl: a first driver, on an etcd client of its own, and for an
// interrupted one a second driver on another client (another process)
// that resumes it or aborts it.
type reshaper struct {
	w     *world
	cli   [2]*memetcd.Client
	op    [2]*fleet.Operator
	queue chan Fault
	done  sync.WaitGroup
	stats reshapeStats
}

// reshapeStats counts what the shape changes did.
type reshapeStats struct {
	mu                   sync.Mutex
	resizes, migrations  int // completed, aborts included
	interrupted, aborted int
	unfinished           int      // not completed when the workload stopped, or refused
	refused              []string // the errors that refused a change
}

// startShape starts, once the fleet owns every partition, the run's
// shape changes (w.reshape queues them) and the comparison of its readers.
func startShape(ctx context.Context, w *world, ex *tenureEx) (*reshaper, *readers, error) {
	rd, err := startReaders(ctx, w, ex.nodes)
	if err != nil {
		return nil, nil, err
	}
	r, err := newReshaper(ctx, w)
	if err != nil {
		rd.close()
		return nil, nil, err
	}
	w.reshape = func(f Fault) {
		select {
		case r.queue <- f:
		case <-ctx.Done():
		}
	}
	return r, rd, nil
}

func newReshaper(ctx context.Context, w *world) (*reshaper, error) {
	r := &reshaper{w: w, queue: make(chan Fault, 16)}
	for i := range r.cli {
		r.cli[i] = w.srv.NewClient()
		op, err := fleet.NewOperator(r.cli[i], fleet.OperatorConfig{Cluster: cluster, Clock: w.fc})
		if err != nil {
			r.close()
			return nil, err
		}
		r.op[i] = op
	}
	r.done.Go(func() {
		for {
			select {
			case f := <-r.queue:
				r.run(ctx, f)
			case <-ctx.Done():
				return
			}
		}
	})
	return r, nil
}

// run runs one shape change until it completes or ctx ends.
func (r *reshaper) run(ctx context.Context, f Fault) {
	first := ctx
	if f.Dur > 0 {
		var cancel context.CancelFunc
		first, cancel = clock.WithTimeout(ctx, r.w.fc, f.Dur)
		defer cancel()
	}
	var finished bool
	switch f.Kind {
	case Resize:
		finished = r.resize(ctx, first, f)
	case Migrate:
		finished = r.migrate(ctx, first, f)
	}
	if finished {
		r.w.healed(r.w.now())
		return
	}
	r.stats.mu.Lock()
	r.stats.unfinished++
	r.stats.mu.Unlock()
}

// retry calls step until it reports done or ctx ends. A configuration
// refused (fleet.ErrInvalidConfig) ends it, noted; step's other errors
// are etcd's and the faults' (and the spec changing under a resize),
// retried after 100ms.
func (r *reshaper) retry(ctx context.Context, step func(context.Context) (bool, error)) bool {
	for ctx.Err() == nil {
		ok, err := step(ctx)
		switch {
		case ok:
			return true
		case errors.Is(err, fleet.ErrInvalidConfig):
			r.stats.mu.Lock()
			r.stats.refused = append(r.stats.refused, err.Error())
			r.stats.mu.Unlock()
			return false
		case err != nil && ctx.Err() == nil:
			clock.Sleep(ctx, r.w.fc, 100*time.Millisecond)
		}
	}
	return false
}

func (r *reshaper) resize(ctx, first context.Context, f Fault) bool {
	opts := fleet.ResizeOptions{Actor: "sim-op1", Reason: "seed sweep", Budget: f.N}
	call := func(op *fleet.Operator, to int, opts fleet.ResizeOptions) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			rep, err := op.Resize(ctx, to, opts)
			if errors.Is(err, fleet.ErrNotFound) {
				return true, nil // an abort of a resize its first driver never wrote
			}
			return err == nil && rep.Completed, err
		}
	}
	if r.retry(first, call(r.op[0], f.To, opts)) {
		r.count(&r.stats.resizes)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	r.stats.mu.Lock()
	r.stats.interrupted++
	r.stats.mu.Unlock()
	opts.Actor = "sim-op2"
	if f.Abort {
		opts.Abort = true
		if r.retry(ctx, call(r.op[1], 0, opts)) {
			r.stats.mu.Lock()
			r.stats.aborted++
			r.stats.mu.Unlock()
			r.count(&r.stats.resizes)
			return true
		}
		return false
	}
	if r.retry(ctx, call(r.op[1], f.To, opts)) {
		r.count(&r.stats.resizes)
		return true
	}
	return false
}

func (r *reshaper) migrate(ctx, first context.Context, f Fault) bool {
	act := fleet.Action{Actor: "sim-op1", Reason: "seed sweep"}
	var target ring.Algorithm
	if !r.retry(ctx, func(ctx context.Context) (bool, error) {
		m, err := r.op[0].MigrateAlgorithm(ctx, fleet.Migration{Target: ring.AlgorithmWeighted, DryRun: true}, act)
		target = ring.AlgorithmBounded
		if m.From == ring.AlgorithmBounded {
			target = ring.AlgorithmWeighted
		}
		return err == nil, err
	}) {
		return false
	}
	call := func(op *fleet.Operator, m fleet.Migration, a fleet.Action) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := op.MigrateAlgorithm(ctx, m, a)
			if errors.Is(err, fleet.ErrNotFound) {
				return true, nil // an abort of a migration its first driver never wrote
			}
			return err == nil && got.Done, err
		}
	}
	m := fleet.Migration{Target: target, Budget: f.N}
	done := func() bool {
		r.stats.mu.Lock()
		r.stats.migrations++
		r.stats.mu.Unlock()
		return true
	}
	if r.retry(first, call(r.op[0], m, act)) {
		return done()
	}
	if ctx.Err() != nil {
		return false
	}
	r.stats.mu.Lock()
	r.stats.interrupted++
	r.stats.mu.Unlock()
	act.Actor = "sim-op2"
	if f.Abort {
		if r.retry(ctx, call(r.op[1], fleet.Migration{Abort: true}, act)) {
			r.stats.mu.Lock()
			r.stats.aborted++
			r.stats.mu.Unlock()
			return done()
		}
		return false
	}
	if r.retry(ctx, call(r.op[1], m, act)) {
		return done()
	}
	return false
}

// count counts a completed shape change.
func (r *reshaper) count(n *int) {
	r.stats.mu.Lock()
	*n++
	r.stats.mu.Unlock()
}

// finalPartitions reads the spec's partition count and whether a resize
// is still in progress.
func (r *reshaper) finalPartitions() (int, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.op[0].ResizeStatus(ctx)
	return rep.Partitions, rep.InProgress, err
}

func (r *reshaper) close() {
	r.done.Wait()
	for _, c := range r.cli {
		if c != nil {
			_ = c.Close()
		}
	}
}
