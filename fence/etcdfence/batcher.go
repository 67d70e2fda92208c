package etcdfence

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of BatcherConfig.
const (
	DefaultMaxBatch      = 64
	DefaultMaxInFlight   = 1
	DefaultCommitTimeout = 10 * time.Second
)

// BatcherConfig tunes a Batcher. A zero field takes the default documented
// on it.
type BatcherConfig struct {
	// MaxBatch is the most writes gathered into one Commit (which may still
	// split them at the store's transaction limits). Zero means
	// DefaultMaxBatch (64).
	MaxBatch int

	// Linger is how long the committer waits for more writes once it holds
	// at least one and fewer than MaxBatch are queued. Zero means it never
	// waits: it commits what is queued at once, and writes that arrive
	// during a commit form the next batch, so batches grow with load and an
	// idle store adds no delay.
	Linger time.Duration

	// MaxInFlight is the most commits running at once. Above 1, the next
	// batch may start while one is in flight, which helps when the round
	// trip to etcd dominates; on a CPU-bound etcd it only makes batches
	// smaller. Zero means DefaultMaxInFlight (1).
	MaxInFlight int

	// CommitTimeout bounds each commit. Zero means DefaultCommitTimeout
	// (10s).
	CommitTimeout time.Duration
}

// DefaultBatcherConfig returns the configuration with every default filled
// in.
func DefaultBatcherConfig() BatcherConfig { return BatcherConfig{}.withDefaults() }

// Validate reports whether c can configure a Batcher. The error wraps
// ErrInvalidConfig.
func (c BatcherConfig) Validate() error {
	if c.MaxBatch < 0 || c.MaxInFlight < 0 || c.Linger < 0 || c.CommitTimeout < 0 {
		return fmt.Errorf("%w: max batch %d, max in flight %d, linger %v and commit timeout %v must not be negative",
			ErrInvalidConfig, c.MaxBatch, c.MaxInFlight, c.Linger, c.CommitTimeout)
	}
	d := c.withDefaults()
	if d.Linger >= d.CommitTimeout {
		return fmt.Errorf("%w: linger %v must be < commit timeout %v", ErrInvalidConfig, d.Linger, d.CommitTimeout)
	}
	return nil
}

func (c BatcherConfig) withDefaults() BatcherConfig {
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	return c
}

// BatcherStats counts a Batcher's work.
type BatcherStats struct {
	// Commits is the number of Commit calls made (each one or more etcd
	// transactions).
	Commits uint64
	// Writes is the number of writes those commits carried.
	Writes uint64
}

// Batcher is group commit for a Store: writes submitted by many goroutines
// are gathered and committed together with Store.Commit, each still fenced
// by its own token and answered with its own result. A stale write is
// refused alone; its neighbours in the batch commit.
//
// One goroutine gathers batches and up to MaxInFlight commits run at once;
// a caller's write completes before its call returns, so writes of one
// goroutine commit in the order it made them. A Batcher is safe for
// concurrent use. Close it to stop its goroutines.
type Batcher struct {
	writeMethods // Put, Delete, CompareAndSwap: through Do, in the next batch
	s            *Store
	cfg          BatcherConfig

	reqs    chan *request
	slots   chan struct{} // one per commit in flight
	flying  sync.WaitGroup
	closing chan struct{}
	done    chan struct{}
	once    sync.Once
	ctx     context.Context // cancelled by Close: aborts a commit in flight
	cancel  context.CancelFunc
	commits atomic.Uint64
	writes  atomic.Uint64
}

type request struct {
	ctx  context.Context
	p    prepared
	done chan Result // buffered: the committer never blocks on it
}

// NewBatcher starts a Batcher that commits to s. cfg is validated and
// copied.
func NewBatcher(s *Store, cfg BatcherConfig) (*Batcher, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	b := &Batcher{
		s:       s,
		cfg:     cfg,
		reqs:    make(chan *request),
		slots:   make(chan struct{}, cfg.MaxInFlight),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	b.writeMethods = writeMethods{do: b.Do}
	go b.run()
	return b, nil
}

// errBatcherNotNew is the error of a Batcher not made by NewBatcher.
var errBatcherNotNew = fmt.Errorf("%w: Batcher not created by NewBatcher", ErrNilArgument)

// Do submits w and waits for its result. Invalid writes are refused at once.
// If ctx ends first, Do returns ctx's error in Result.Err; a write already
// handed to the committer may still be applied. After Close, Do returns
// ErrClosed.
func (b *Batcher) Do(ctx context.Context, w Write) Result {
	if b.done == nil {
		return Result{Err: errBatcherNotNew}
	}
	p, err := b.s.prepare(w)
	if err != nil {
		return Result{Err: err}
	}
	r := &request{ctx: ctx, p: p, done: make(chan Result, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-b.closing:
		return Result{Err: ErrClosed}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-b.done:
		select {
		case res := <-r.done:
			return res
		default:
			return Result{Err: ErrClosed}
		}
	}
}

// Stats returns the counts of commits and writes so far.
func (b *Batcher) Stats() BatcherStats {
	return BatcherStats{Commits: b.commits.Load(), Writes: b.writes.Load()}
}

// Close stops the Batcher: new writes get ErrClosed, commits in flight are
// aborted (their writes get the context error and may or may not have been
// applied), and Close returns once every goroutine of the Batcher has
// ended. It is safe to call more than once.
func (b *Batcher) Close() error {
	if b.done == nil {
		return errBatcherNotNew
	}
	b.once.Do(func() {
		close(b.closing)
		b.cancel()
	})
	<-b.done
	return nil
}

// maxYields is how many times the gatherer yields the processor, once the
// queue is empty, before it closes a batch: writers answered by the last
// commit are runnable then, and joining them to this batch instead of the
// next one roughly doubles the batch size under steady load, for the cost
// of a scheduler round trip.
const maxYields = 1

// run gathers batches and starts their commits. It takes a commit slot
// before it gathers, so that writes arriving while every slot is busy join
// the next batch instead of waiting behind a batch gathered too early.
func (b *Batcher) run() {
	defer close(b.done)
	defer b.flying.Wait()
	var linger *time.Timer
	for {
		select {
		case b.slots <- struct{}{}:
		case <-b.closing:
			return
		}
		batch := make([]*request, 0, b.cfg.MaxBatch)
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-b.closing:
			return
		}
		var expired <-chan time.Time
		if b.cfg.Linger > 0 {
			if linger == nil {
				linger = time.NewTimer(b.cfg.Linger)
			} else {
				linger.Reset(b.cfg.Linger)
			}
			expired = linger.C
		}
		yields := 0
	gather:
		for len(batch) < b.cfg.MaxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
				continue
			default:
			}
			if expired == nil {
				// Let writers just answered by a finished commit submit
				// again before this batch closes.
				if yields < maxYields {
					yields++
					runtime.Gosched()
					continue
				}
				break gather
			}
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			case <-expired:
				expired = nil
				break gather
			case <-b.closing:
				break gather
			}
		}
		if linger != nil && expired != nil {
			linger.Stop()
		}
		b.flying.Add(1)
		go func() {
			defer b.flying.Done()
			b.commit(batch)
			<-b.slots
		}()
	}
}

// commit commits the writes of batch whose callers are still waiting and
// answers every request.
func (b *Batcher) commit(batch []*request) {
	items := make([]item, 0, len(batch))
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- Result{Err: err}
			continue
		}
		items = append(items, item{idx: len(live), p: r.p})
		live = append(live, r)
	}
	if len(items) == 0 {
		return
	}
	results := make([]Result, len(items))
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.CommitTimeout)
	_ = b.s.commitItems(ctx, items, results) // failures are in results
	cancel()
	b.commits.Add(1)
	b.writes.Add(uint64(len(items)))
	for i, r := range live {
		r.done <- results[i]
	}
}
