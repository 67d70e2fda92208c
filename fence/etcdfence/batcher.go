package etcdfence

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
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
	// split them at the store's transaction limits), each coalesced write
	// counted. Zero means DefaultMaxBatch (64).
	MaxBatch int

	// Linger is how long a committer waits for more writes once it holds
	// at least one and fewer than MaxBatch are queued. Zero means it never
	// waits: a write that finds the Batcher idle commits at once, writes
	// that arrive during a commit form the next batch, so batches grow with
	// load and an idle store adds no delay. Above zero, every write waits
	// in a batch, even a lone one.
	Linger time.Duration

	// MaxInFlight is the most commits running at once, writes committed at
	// once included. Above 1, the next batch may start while one is in
	// flight, which helps when the round trip to etcd dominates; on a
	// CPU-bound etcd it only makes batches smaller. Zero means
	// DefaultMaxInFlight (1).
	MaxInFlight int

	// CommitTimeout bounds each commit. Zero means DefaultCommitTimeout
	// (10s).
	CommitTimeout time.Duration

	// NoCoalesce keeps every Put a write of its own in etcd: successive
	// Puts to one key then commit in successive transactions, and the
	// key's Version counts each of them. False (the default) lets the
	// Batcher coalesce them; see Batcher.
	NoCoalesce bool
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
	// Commits is the number of commits made (each one or more etcd
	// transactions), Alone included.
	Commits uint64
	// Writes is the number of writes those commits carried, coalesced ones
	// included.
	Writes uint64
	// Alone is the number of writes committed at once, on their caller's
	// goroutine, because nothing was there to batch them with.
	Alone uint64
	// Coalesced is the number of Puts that shared their write in etcd with
	// a later Put of the same key and token (see Batcher).
	Coalesced uint64
}

// Batcher is group commit for a Store: writes submitted by many goroutines
// are gathered and committed together with one transaction (as
// Store.Commit does), each still fenced by its own token and answered with
// its own result. A stale write is refused alone; its neighbours in the
// batch commit.
//
// Batches form only when they pay. A write that finds no commit in flight
// and no write waiting commits at once, on its caller's goroutine, as
// Store.Put would. Otherwise it waits in a queue, and the next batch takes
// the queue as it stands when a commit slot frees (MaxInFlight), after
// letting the writers just answered submit again, so that under load
// batches grow to the number of writers.
//
// Writes to one key apply in the order the Batcher received them (for one
// goroutine, the order of its calls, since a call returns only once its
// write committed). A write never shares a transaction with another write
// to its key, and is never sent while an earlier write to its key waits or
// is in flight, with one exception: consecutive Puts to one key under the
// same token (one owner's tenure) are coalesced, unless
// BatcherConfig.NoCoalesce is set. Only the last of them is written, and
// every one of them gets its Result: the same refusal (they share a
// token), or the revision of the transaction that wrote the last value.
// The earlier Puts count as applied at that revision and overwritten in
// it, so no reader or watcher sees their values, and the key's Version
// rises by one for the group rather than one per Put. A Delete or a
// CompareAndSwap is never coalesced; like a Put under another token, it
// waits for the next transaction.
//
// A Batcher is safe for concurrent use. Close it to stop its goroutines.
type Batcher struct {
	writeMethods // Put, Delete, CompareAndSwap: through Do
	s            *Store
	cfg          BatcherConfig

	mu        sync.Mutex
	queue     []*request     // waiting writes, in the order received
	inFlight  int            // commits running, lone writes included
	busy      map[string]int // with MaxInFlight > 1: data keys in flight
	keys      map[string]int // scratch of take: data key -> group, or -1
	parked    int            // committers waiting for work
	lingering bool           // a committer lingers for MaxBatch writes
	stalled   bool           // every queued write waits for a key in flight
	closed    bool

	wake       chan struct{} // cap 1: work for a parked or lingering committer
	requests   sync.Pool     // of *request
	committers sync.WaitGroup
	done       chan struct{}
	once       sync.Once
	ctx        context.Context // cancelled by Close: aborts commits in flight
	cancel     context.CancelFunc

	commits, writes, alone, coalesced atomic.Uint64
}

// request is a write waiting in the queue or in a batch.
type request struct {
	ctx  context.Context
	p    prepared
	next *request // the next write coalesced with this one
	res  Result
	done chan struct{} // cap 1: res is set
}

// answer sets r's result and wakes its caller; r must not be touched after.
func (r *request) answer(res Result) {
	r.res = res
	r.done <- struct{}{}
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
		s:      s,
		cfg:    cfg,
		keys:   make(map[string]int),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
	if cfg.MaxInFlight > 1 {
		b.busy = make(map[string]int)
	}
	b.requests.New = func() any { return &request{done: make(chan struct{}, 1)} }
	b.writeMethods = writeMethods{do: b.Do}
	b.committers.Add(cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go b.committer()
	}
	return b, nil
}

// errBatcherNotNew is the error of a Batcher not made by NewBatcher.
var errBatcherNotNew = fmt.Errorf("%w: Batcher not created by NewBatcher", ErrNilArgument)

// Do submits w and waits for its result. Invalid writes are refused at once.
// If ctx ends first, Do returns ctx's error in Result.Err; a write already
// taken into a batch may still be applied. After Close, Do returns
// ErrClosed.
func (b *Batcher) Do(ctx context.Context, w Write) Result {
	if b.done == nil {
		return Result{Err: errBatcherNotNew}
	}
	p, err := b.s.prepare(w)
	if err != nil {
		return Result{Err: err}
	}
	if err := ctx.Err(); err != nil {
		return Result{Err: err}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Result{Err: ErrClosed}
	}
	if b.cfg.Linger == 0 && len(b.queue) == 0 && b.inFlight < b.cfg.MaxInFlight && b.busy[p.full] == 0 {
		b.inFlight++
		b.markBusy(p.full, 1)
		b.mu.Unlock()
		return b.commitAlone(ctx, p)
	}
	r := b.requests.Get().(*request)
	r.ctx, r.p = ctx, p
	b.queue = append(b.queue, r)
	b.stalled = false
	if b.parked > 0 || (b.lingering && len(b.queue) >= b.cfg.MaxBatch) {
		b.signal()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		res := r.res
		*r = request{done: r.done}
		b.requests.Put(r)
		return res
	case <-ctx.Done():
		// r stays with the Batcher, which skips it if it has not taken
		// it yet.
		return Result{Err: ctx.Err()}
	}
}

// commitAlone commits p, which holds a commit slot, on the caller's
// goroutine, bounded by CommitTimeout and aborted by Close.
func (b *Batcher) commitAlone(ctx context.Context, p prepared) Result {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CommitTimeout)
	stop := context.AfterFunc(b.ctx, cancel)
	res := b.s.writePrepared(ctx, p)
	stop()
	cancel()
	b.commits.Add(1)
	b.writes.Add(1)
	b.alone.Add(1)
	b.mu.Lock()
	b.inFlight--
	b.markBusy(p.full, -1)
	b.stalled = false
	if b.parked > 0 && len(b.queue) > 0 {
		b.signal()
	}
	b.mu.Unlock()
	return res
}

// signal wakes a parked or lingering committer, if one is not woken yet.
func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// markBusy counts the writes to the data key full in flight, with
// MaxInFlight > 1 (with one slot, nothing else is in flight when a batch
// is taken).
func (b *Batcher) markBusy(full string, delta int) {
	if b.busy == nil {
		return
	}
	if n := b.busy[full] + delta; n > 0 {
		b.busy[full] = n
	} else {
		delete(b.busy, full)
	}
}

// ready reports whether a committer can take a batch now.
func (b *Batcher) ready() bool {
	return len(b.queue) > 0 && !b.stalled && b.inFlight < b.cfg.MaxInFlight
}

// Stats returns the counts of commits and writes so far.
func (b *Batcher) Stats() BatcherStats {
	return BatcherStats{
		Commits:   b.commits.Load(),
		Writes:    b.writes.Load(),
		Alone:     b.alone.Load(),
		Coalesced: b.coalesced.Load(),
	}
}

// Close stops the Batcher: new writes get ErrClosed, so do writes still
// queued, commits in flight are aborted (their writes get the context
// error and may or may not have been applied), and Close returns once
// every goroutine of the Batcher has ended. It is safe to call more than
// once.
func (b *Batcher) Close() error {
	if b.done == nil {
		return errBatcherNotNew
	}
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		b.cancel()
		b.committers.Wait()
		b.mu.Lock()
		queue := b.queue
		b.queue = nil
		b.mu.Unlock()
		for _, r := range queue {
			r.answer(Result{Err: ErrClosed})
		}
		close(b.done)
	})
	<-b.done
	return nil
}

// group is the writes of a batch to one key: one write, or consecutive
// Puts under one token coalesced into the last one's.
type group struct {
	p          prepared // what is written: the last write of the group
	head, tail *request // linked by request.next
}

// committer takes batches from the queue and commits them while a commit
// slot is free, until Close. It keeps its slot from one batch to the next
// as long as writes keep coming: writers answered by a commit then join
// the next batch instead of committing alone.
func (b *Batcher) committer() {
	defer b.committers.Done()
	var (
		groups  []group
		items   []item
		results []Result
		linger  *time.Timer
	)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for !b.closed && !b.ready() {
			b.parked++
			b.mu.Unlock()
			select {
			case <-b.wake:
			case <-b.ctx.Done():
			}
			b.mu.Lock()
			b.parked--
		}
		if b.closed {
			return
		}
		b.inFlight++ // the slot is this committer's from here
		for !b.closed {
			b.mu.Unlock()
			if b.cfg.Linger > 0 {
				linger = b.linger(linger)
			} else {
				b.gather()
			}
			b.mu.Lock()
			groups = b.take(groups[:0])
			if len(groups) == 0 {
				break
			}
			if b.ready() && b.parked > 0 {
				b.signal()
			}
			b.mu.Unlock()

			items, results = b.commit(groups, items, results)

			b.mu.Lock()
			if b.busy != nil {
				for _, g := range groups {
					b.markBusy(g.p.full, -1)
				}
				b.stalled = false
			}
			clear(groups) // drop the requests
		}
		b.inFlight--
		b.stalled = len(b.queue) > 0 // what is left waits for keys in flight
	}
}

// maxYields bounds how many times a committer yields the processor while
// it gathers a batch.
const maxYields = 8

// gather lets writers queue before a batch closes, holding a commit slot:
// it yields the processor, and yields again as long as the last yield let
// at least one more write queue (up to maxYields times, or until MaxBatch
// are queued). Writers just answered by a commit, runnable now, join this
// batch instead of the next one; a scheduler round trip costs far less
// than the commit they would wait for, and once a yield brings nobody,
// nobody is coming.
func (b *Batcher) gather() {
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	for range maxYields {
		runtime.Gosched()
		b.mu.Lock()
		prev := n
		n = len(b.queue)
		b.mu.Unlock()
		if n == prev || n >= b.cfg.MaxBatch {
			return
		}
	}
}

// linger waits, holding a commit slot, until MaxBatch writes are queued,
// Linger has passed or the Batcher closes. It returns its timer for reuse.
func (b *Batcher) linger(t *time.Timer) *time.Timer {
	b.mu.Lock()
	full := len(b.queue) >= b.cfg.MaxBatch
	b.lingering = !full
	b.mu.Unlock()
	if full {
		return t
	}
	if t == nil {
		t = time.NewTimer(b.cfg.Linger)
	} else {
		t.Reset(b.cfg.Linger)
	}
	select {
	case <-t.C:
	case <-b.wake:
		t.Stop()
	case <-b.ctx.Done():
		t.Stop()
	}
	b.mu.Lock()
	b.lingering = false
	b.mu.Unlock()
	return t
}

// take removes from the queue, in order, the writes of the next batch and
// returns them appended to groups, one group per key. A write stays in the
// queue if an earlier write to its key stays or is in flight, or if its
// key already has a group it cannot be coalesced into; then every later
// write to that key stays too, so that writes to one key keep their order.
// Writes whose caller has gone are answered with their context's error.
// b.mu is held.
func (b *Batcher) take(groups []group) []group {
	taken := 0
	rest := b.queue[:0]
	for i, r := range b.queue {
		if taken == b.cfg.MaxBatch {
			rest = append(rest, b.queue[i:]...)
			break
		}
		if err := r.ctx.Err(); err != nil {
			r.answer(Result{Err: err})
			continue
		}
		gi, seen := b.keys[r.p.full]
		switch {
		case !seen && b.busy[r.p.full] == 0:
			b.keys[r.p.full] = len(groups)
			groups = append(groups, group{p: r.p, head: r, tail: r})
			b.markBusy(r.p.full, 1)
			taken++
		case seen && gi >= 0 && b.coalesces(groups[gi].p, r.p):
			g := &groups[gi]
			g.tail.next, g.tail, g.p = r, r, r.p
			b.coalesced.Add(1)
			taken++
		default:
			b.keys[r.p.full] = -1
			rest = append(rest, r)
		}
	}
	clear(b.keys)
	clear(b.queue[len(rest):])
	b.queue = rest
	return groups
}

// coalesces reports whether next may be coalesced into a group whose last
// write is last: both are Puts under the same token, so that writing only
// next gives each the Result it would get alone.
func (b *Batcher) coalesces(last, next prepared) bool {
	return !b.cfg.NoCoalesce && last.w.Kind == KindPut && next.w.Kind == KindPut && last.w.Token == next.w.Token
}

// commit commits groups, whose writes hold a commit slot, and answers every
// request of them. items and results are scratch space, returned for
// reuse.
func (b *Batcher) commit(groups []group, items []item, results []Result) ([]item, []Result) {
	items = items[:0]
	for i := range groups {
		items = append(items, item{idx: i, p: groups[i].p})
	}
	results = slices.Grow(results[:0], len(groups))[:len(groups)]
	clear(results)
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.CommitTimeout)
	_ = b.s.commitItems(ctx, items, results, true) // failures are in results
	cancel()
	n := 0
	for i := range groups {
		for r := groups[i].head; r != nil; r = r.next {
			n++
		}
	}
	// Counted before the answers, so that a caller answered sees its
	// write in Stats.
	b.commits.Add(1)
	b.writes.Add(uint64(n))
	for i := range groups {
		for r := groups[i].head; r != nil; {
			next := r.next
			r.next = nil
			r.answer(results[i])
			r = next
		}
	}
	clear(items) // drop the values
	return items, results
}
