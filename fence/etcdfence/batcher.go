package etcdfence

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tenure-go/tenure/fence"
)

// This file holds the group-commit machinery's contract and its callers'
// side: the Batcher, its queue of requests, do and the write methods, and
// Close. batcher_loop.go holds the committers that form and commit the
// batches, batcher_config.go the BatcherConfig. A batch reaches etcd
// through Store.commitEntries (commit.go), as Store.Commit's writes do.

// Batcher is group commit for a Store: writes submitted by many goroutines
// are gathered and committed together with one transaction (as
// Store.Commit does), each still fenced by its own token and answered with
// its own result.
//
// The contract:
//
//   - Answers: each write's Result is the one it would get committed alone
//     (Store.Put, Delete or CompareAndSwap, in the order the Batcher
//     received the writes), except its Revision, which it shares with the
//     other writes of its transaction. A stale write is refused alone; its
//     neighbours in the batch commit. Every write is checked by etcd
//     against its scope's floor in the transaction that carries it, as in
//     Store.Commit.
//   - Order: writes to one key apply in the order received (for one
//     goroutine, the order of its calls, since a call returns only once its
//     write committed).
//   - What is batched: writes waiting while a commit is in flight, up to
//     MaxBatch, at most one per key per transaction; consecutive Puts to
//     one key under one token may be coalesced into one (see below).
//
// Batches form only when they pay. A write that finds no commit in flight
// and no write waiting commits at once, on its caller's goroutine, as
// Store.Put would. Otherwise it waits in a queue, and the next batch takes
// the queue as it stands when a commit slot frees (MaxInFlight), after
// letting the writers just answered submit again (as many of them as
// recent batches saw come back: writers that spread their writes over
// several Batchers are not waited for), so that under load batches grow
// to the number of writers.
//
// A write never shares a transaction with another write
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
	s   *Store
	cfg BatcherConfig

	mu       sync.Mutex
	queue    []*request     // waiting writes, in the order received
	inFlight int            // commits running, lone writes included
	busy     map[string]int // with MaxInFlight > 1: data keys in flight
	keys     map[string]int // scratch of take: data key -> group, or -1
	parked   int            // committers waiting for work
	waitFor  int            // a committer waits, holding a slot, for this many queued writes
	stalled  bool           // every queued write waits for a key in flight
	closed   bool

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
	ctx   context.Context
	e     entry
	next  *request // the next write coalesced with this one
	res   Result
	from  *handoff      // the committer that answered, if one did
	state atomic.Int32  // reqWaiting, then reqAnswered or reqAbandoned
	done  chan struct{} // cap 1: res is set
}

// The states of a request: its caller waits for it until it is answered,
// or abandons it when its context ends first.
const (
	reqWaiting int32 = iota
	reqAnswered
	reqAbandoned
)

// answer sets r's result and wakes its caller, unless the caller has gone;
// r must not be touched after. h is the committer answering r's batch, which
// counts r's caller until it runs again (nil: none counts it).
func (r *request) answer(res Result, h *handoff) {
	r.res, r.from = res, h
	if !r.state.CompareAndSwap(reqWaiting, reqAnswered) {
		return // abandoned: the caller returned its context's error
	}
	if h != nil {
		h.out.Add(1)
	}
	r.done <- struct{}{}
}

// received is called by r's caller once it has r's answer: r.res is
// final, and the committer that answered learns that the caller runs again.
func (r *request) received() Result {
	if r.from != nil {
		r.from.resumed()
	}
	return r.res
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
	b.committers.Add(cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go b.committer()
	}
	return b, nil
}

// errBatcherNotNew is the error of a Batcher not made by NewBatcher.
var errBatcherNotNew = fmt.Errorf("%w: Batcher not created by NewBatcher", ErrNilArgument)

// do submits w and waits for its result. Invalid writes are refused at once.
// If ctx ends first, do returns ctx's error in Result.Err; a write already
// taken into a batch may still be applied. After Close, do returns
// ErrClosed.
func (b *Batcher) do(ctx context.Context, w Write) Result {
	if b.done == nil {
		return Result{Err: errBatcherNotNew}
	}
	e, err := b.s.entry(w, 0)
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
	if b.cfg.Linger == 0 && len(b.queue) == 0 && b.inFlight < b.cfg.MaxInFlight && b.busy[e.full] == 0 {
		b.inFlight++
		b.markBusy(e.full, 1)
		b.mu.Unlock()
		return b.commitAlone(ctx, e)
	}
	r := b.requests.Get().(*request)
	r.ctx, r.e = ctx, e
	b.queue = append(b.queue, r)
	b.stalled = false
	if b.parked > 0 || (b.waitFor > 0 && len(b.queue) >= b.waitFor) {
		b.signal()
	}
	b.mu.Unlock()
	if ctx.Done() == nil { // a context that never ends: no select
		<-r.done
	} else {
		select {
		case <-r.done:
		case <-ctx.Done():
			if r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
				// r stays with the Batcher, which skips it if it has
				// not taken it yet, and drops its answer if it has.
				return Result{Err: ctx.Err()}
			}
			<-r.done // answered meanwhile: the answer is on its way
		}
	}
	res := r.received()
	*r = request{done: r.done} // state reqWaiting
	b.requests.Put(r)
	return res
}

// Put writes value at key under t, as Store.Put does, in a batch: it waits
// for the write's result. It returns the etcd revision of the write, or a
// *fence.StaleError if t is older than its scope's floor. Invalid writes
// are refused at once. If ctx ends first, Put returns ctx's error; a write
// already taken into a batch may still be applied. After Close, it returns
// ErrClosed.
func (b *Batcher) Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error) {
	r := b.do(ctx, Write{Kind: KindPut, Token: t, Key: key, Value: value})
	return r.Revision, r.Err
}

// Delete deletes key under t in a batch, as Put writes. It reports whether
// the key existed.
func (b *Batcher) Delete(ctx context.Context, t fence.Token, key string) (bool, error) {
	r := b.do(ctx, Write{Kind: KindDelete, Token: t, Key: key})
	return r.Deleted, r.Err
}

// CompareAndSwap writes value at key under t iff the key's version is
// version (0: the key must not exist), in a batch, as Put writes. It
// returns the revision of the write, a *fence.StaleError if t is stale, or
// a *VersionError (errors.Is ErrVersionMismatch) if the version differs.
func (b *Batcher) CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error) {
	r := b.do(ctx, Write{Kind: KindCompareAndSwap, Token: t, Key: key, Version: version, Value: value})
	return r.Revision, r.Err
}

// commitAlone commits e, which holds a commit slot, on the caller's
// goroutine, bounded by CommitTimeout and aborted by Close.
func (b *Batcher) commitAlone(ctx context.Context, e entry) Result {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CommitTimeout)
	stop := context.AfterFunc(b.ctx, cancel)
	res := b.s.commitOne(ctx, e)
	stop()
	cancel()
	b.commits.Add(1)
	b.writes.Add(1)
	b.alone.Add(1)
	b.mu.Lock()
	b.inFlight--
	b.markBusy(e.full, -1)
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
// once, and does nothing on a Batcher not made by NewBatcher.
func (b *Batcher) Close() {
	if b.done == nil {
		return
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
			r.answer(Result{Err: ErrClosed}, nil)
		}
		close(b.done)
	})
	<-b.done
}
