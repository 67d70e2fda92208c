package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Writer is what a Batcher runs in each batch's transaction: the caller's
// own statements for the writes it was given.
type Writer[W, R any] struct {
	// Write writes batch, the admitted writes of one transaction in the
	// order the Batcher received them, and returns one result per write,
	// in the same order. It must give each write the result that the write
	// would get in a transaction of its own run after the writes before it
	// (a running total continues from the one before it; a second write
	// with the same idempotency key finds the first). A write refused on
	// the caller's own terms (a business rule) is answered through its
	// result, and Write goes on with the others: an error from Write fails
	// the whole batch. Write must change no state outside tx, since the
	// transaction may still fail; Committed is where memory follows. It
	// must not be nil, and runs on the Batcher's goroutine, one batch at a
	// time.
	Write func(ctx context.Context, tx *sql.Tx, batch []W) ([]R, error)
	// Committed, if not nil, is called once the batch's transaction has
	// committed, with the writes and results Write had, before the next
	// batch begins and before any caller gets its answer: a cache in
	// memory that Write reads is brought up to date here.
	Committed func(batch []W, results []R)
}

// Batcher is group commit over a database: fenced writes submitted by many
// goroutines are gathered and committed together in one transaction, each
// still fenced by its own token and answered with its own result.
//
// One goroutine commits. It takes the writes that queued while the previous
// transaction was in flight (up to BatcherConfig.MaxBatch) and runs one
// transaction for them: it advances each distinct token once, as
// Fences.AdvanceAll does (one multi-row statement for the whole batch,
// the scopes' rows locked in the order of their scopes), runs Writer.Write
// with the writes whose tokens were admitted, and commits. A write whose
// token is stale never reaches Write: its caller gets the
// *fence.StaleError a lone Fences.Do would give, and the other writes of
// the batch commit. The floors are read in each transaction, so a floor
// raised by another process between two batches refuses the writes of the
// next one.
//
// If the transaction fails (begin, Write, commit), every admitted write of
// the batch gets the error; after a failed commit the outcome is unknown,
// as for any transaction, and callers retry with whatever makes their
// writes idempotent.
//
// A Batcher is safe for concurrent use. Close it to stop its goroutine.
type Batcher[W, R any] struct {
	db  *sql.DB
	f   *Fences
	w   Writer[W, R]
	cfg BatcherConfig

	mu     sync.Mutex
	queue  []*pending[W, R] // waiting writes, in the order received
	closed bool

	wake chan struct{} // cap 1: the queue grew, or Close was called
	done chan struct{} // closed when the committing goroutine ends
	once sync.Once
}

// pending is one write waiting in the queue or in a batch.
type pending[W, R any] struct {
	tok   fence.Token
	w     W
	res   R
	err   error
	state atomic.Int32  // pendWaiting, then pendTaken or pendAbandoned
	done  chan struct{} // cap 1: res and err are set
}

// The states of a pending write: its caller waits until a batch takes it,
// or abandons it when its context ends first.
const (
	pendWaiting int32 = iota
	pendTaken
	pendAbandoned
)

// answer sets p's outcome and wakes its caller, who may have gone.
func (p *pending[W, R]) answer(res R, err error) {
	p.res, p.err = res, err
	p.done <- struct{}{}
}

// NewBatcher starts a Batcher that commits to db, fenced by f, with w's
// statements. cfg is validated and copied. It returns an error wrapping
// ErrNilArgument for a nil db, f or w.Write.
func NewBatcher[W, R any](db *sql.DB, f *Fences, w Writer[W, R], cfg BatcherConfig) (*Batcher[W, R], error) {
	switch {
	case db == nil:
		return nil, &nilError{what: "*sql.DB"}
	case f == nil:
		return nil, &nilError{what: "*Fences"}
	case w.Write == nil:
		return nil, &nilError{what: "Writer.Write"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Batcher[W, R]{
		db: db, f: f, w: w, cfg: cfg.withDefaults(),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go b.run()
	return b, nil
}

// Do submits the write w under the token t and returns its result, once
// the transaction that carried it has committed, or the error that
// refused it: a *fence.StaleError (errors.Is fence.ErrStale) if t is
// stale, the transaction's error if it failed. An invalid t gives an
// error wrapping fence.ErrInvalidToken before anything is queued.
//
// If ctx ends while w waits for a batch, w is withdrawn and Do returns
// ctx's error: w was not written. If ctx ends once a batch has taken w,
// Do returns ctx's error at once and w may still be committed. A caller
// that wants the database's answer whatever happens to its request
// passes context.WithoutCancel. After Close, Do returns ErrClosed.
func (b *Batcher[W, R]) Do(ctx context.Context, t fence.Token, w W) (R, error) {
	var zero R
	switch {
	case b == nil || b.wake == nil:
		return zero, &nilError{what: "*Batcher (not made by NewBatcher)"}
	case nilness.Is(ctx):
		return zero, &nilError{what: "context"}
	}
	if err := t.Validate(); err != nil {
		return zero, err
	}
	p := &pending[W, R]{tok: t, w: w, done: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrClosed
	}
	if ctx.Err() != nil {
		b.mu.Unlock()
		return zero, context.Cause(ctx)
	}
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		if p.state.CompareAndSwap(pendWaiting, pendAbandoned) {
			return zero, context.Cause(ctx) // the batch skips it
		}
		select {
		case <-p.done: // answered meanwhile: the answer is certain
			return p.res, p.err
		default:
			return zero, context.Cause(ctx)
		}
	}
}

// Close stops the Batcher: later calls of Do return ErrClosed, the writes
// already queued are committed, and Close returns once the Batcher's
// goroutine has ended. It is safe to call more than once and concurrently.
func (b *Batcher[W, R]) Close() {
	if b == nil || b.wake == nil {
		return
	}
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		select {
		case b.wake <- struct{}{}:
		default:
		}
	})
	<-b.done
}

// run is the committing goroutine: it commits the queue, a batch at a
// time, until the Batcher is closed and the queue is empty.
func (b *Batcher[W, R]) run() {
	defer close(b.done)
	for range b.wake {
		for {
			batch, closed := b.take()
			if len(batch) > 0 {
				b.commit(batch)
				continue
			}
			if closed {
				return
			}
			break
		}
	}
}

// take removes up to MaxBatch writes from the queue, skipping those whose
// callers have gone, and reports whether the Batcher is closed.
func (b *Batcher[W, R]) take() ([]*pending[W, R], bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*pending[W, R]
	i := 0
	for ; i < len(b.queue) && len(batch) < b.cfg.MaxBatch; i++ {
		if p := b.queue[i]; p.state.CompareAndSwap(pendWaiting, pendTaken) {
			batch = append(batch, p)
		}
	}
	n := copy(b.queue, b.queue[i:])
	clear(b.queue[n:])
	b.queue = b.queue[:n]
	return batch, b.closed
}

// commit runs one transaction for batch and answers every write of it.
func (b *Batcher[W, R]) commit(batch []*pending[W, R]) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	live, results, err := b.transact(ctx, batch)
	var zero R
	if err != nil {
		err = fmt.Errorf("sqlfence: batch of %d writes: %w", len(batch), err)
		for _, p := range batch {
			if p.err != nil {
				p.answer(zero, p.err) // stale: refused whatever became of the others
			} else {
				p.answer(zero, err)
			}
		}
		return
	}
	if b.w.Committed != nil && len(live) > 0 {
		ws := make([]W, len(live))
		for i, p := range live {
			ws[i] = p.w
		}
		b.w.Committed(ws, results)
	}
	for _, p := range batch {
		if p.err != nil {
			p.answer(zero, p.err) // stale
		}
	}
	for i, p := range live {
		p.answer(results[i], nil)
	}
}

// transact runs batch's transaction: it advances the distinct tokens, sets
// the error of each write whose token is stale, and writes the others. It
// returns the admitted writes and their results, or the error that failed
// the transaction.
func (b *Batcher[W, R]) transact(ctx context.Context, batch []*pending[W, R]) ([]*pending[W, R], []R, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	seen := make(map[fence.Token]bool, len(batch))
	tokens := make([]fence.Token, 0, len(batch))
	for _, p := range batch {
		if !seen[p.tok] {
			seen[p.tok] = true
			tokens = append(tokens, p.tok)
		}
	}
	if err := b.f.advanceAll(ctx, tx, tokens); err != nil {
		var ste *StaleTokensError
		if !errors.As(err, &ste) {
			return nil, nil, err
		}
		stale := make(map[fence.Token]*fence.StaleError, len(ste.Stale))
		for _, se := range ste.Stale {
			stale[fence.Token{Scope: se.Scope, Epoch: se.Presented}] = se
		}
		for _, p := range batch {
			if se := stale[p.tok]; se != nil {
				p.err = se
			}
		}
	}
	live := make([]*pending[W, R], 0, len(batch))
	ws := make([]W, 0, len(batch))
	for _, p := range batch {
		if p.err == nil {
			live = append(live, p)
			ws = append(ws, p.w)
		}
	}
	if len(live) == 0 {
		return nil, nil, nil // every token stale: nothing to record
	}
	results, err := b.w.Write(ctx, tx, ws)
	if err != nil {
		return nil, nil, err
	}
	if len(results) != len(ws) {
		return nil, nil, fmt.Errorf("%w: Writer.Write returned %d results for %d writes", ErrInvalidQuery, len(results), len(ws))
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	return live, results, nil
}
