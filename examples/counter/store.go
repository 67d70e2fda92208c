package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership"
)

// loadTimeout bounds the query that loads a partition's counters.
const loadTimeout = 10 * time.Second

// errInvalidated reports an increment queued for a partition whose memory
// was dropped after a failed transaction of unknown outcome: the caller
// retries with the same idempotency key, and the partition is loaded again
// from the database.
var errInvalidated = errors.New("counter: partition state invalidated after a failed commit; retry")

// partition is one partition's counters in memory, under one tenure (one
// token). The owner is the only writer of its partitions, so the memory is
// the truth once loaded: it changes only after a commit succeeded.
type partition struct {
	p      int
	token  fence.Token
	loaded chan struct{} // closed once the load ended; then err is set
	err    error

	serial sync.Mutex // --group-commit=false: one transaction at a time

	mu     sync.Mutex
	values map[string]int64 // committed values of the keys that have rows
	seq    int64            // the highest seq of the partition's rows (see prepare.go)
	dead   error            // set when the tenure is known to be over: every later increment fails with it
	stale  bool             // the database has refused an increment of the partition as stale

	prepared bool                // the load caught up a prepared snapshot (set before loaded is closed)
	read     map[string]struct{} // the keys with a value read in this tenure (countRead)
}

func (p *partition) value(key string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[key]
}

func (p *partition) lastSeq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

func (p *partition) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.values)
}

func (p *partition) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// refusedStale records that the database refused an increment of the
// partition with se: the tenure is over (if nothing ended it before), and
// it reports whether this is the partition's first stale refusal, which
// is logged even when the tenure's end was known before (its release
// callback ran first).
func (p *partition) refusedStale(se *fence.StaleError) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = se
	}
	first, p.stale = !p.stale, true
	return first
}

// kill ends the partition's tenure with err, unless it has ended.
func (p *partition) kill(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = err
	}
}

// store keeps the counters of the partitions this node owns. It is safe for
// concurrent use.
type store struct {
	db      *sql.DB
	dialect sqlfence.Dialect
	fences  *sqlfence.Fences
	log     hclog.Logger
	metrics *metrics

	mu     sync.Mutex
	parts  map[int]*partition
	ended  map[int]int64     // per partition, the highest epoch whose tenure ended here
	staged map[int]*snapshot // per partition, a preparation's snapshot (prepare.go)
	warm   bool              // prepare partitions before their claim (OnPrepare)

	preparing chan struct{} // the preparations reading now (prepare.go)
}

func newStore(db *sql.DB, dialect sqlfence.Dialect, fences *sqlfence.Fences, log hclog.Logger, m *metrics, warm bool) *store {
	return &store{
		db: db, dialect: dialect, fences: fences, log: log, metrics: m,
		parts: make(map[int]*partition), ended: make(map[int]int64), staged: make(map[int]*snapshot), warm: warm,
		preparing: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
	}
}

// callbacks are the node's: a new tenure starts loading its partition at
// once (the node has raised the partition's floor in the database before,
// so the previous owner's last commit is visible and nothing of it can
// commit later), from the snapshot its preparation staged if there is one
// (prepare.go); an ended tenure drops the partition's memory. OnAcquired
// starts the load and returns: loads of the partitions acquired together
// run in parallel, and each request waits for its partition's (ready).
func (s *store) callbacks() ownership.Callbacks {
	var prepare func(ownership.Event) error
	if s.warm {
		prepare = s.prepare
	}
	return ownership.Callbacks{
		OnPrepare: prepare,
		OnAcquired: func(e ownership.Event) {
			p, t := e.Partition, e.Token
			s.metrics.owned.Inc()
			_, _ = s.partition(p, t)
			s.log.Debug("acquired", "partition", p, "epoch", t.Epoch, "prepared", !e.Prepared.IsZero())
		},
		OnReleased: func(e ownership.Event) {
			p, t, r := e.Partition, e.Token, e.Reason
			s.metrics.owned.Dec()
			s.release(p, t)
			s.log.Debug("released", "partition", p, "epoch", t.Epoch, "reason", r)
		},
	}
}

// partition returns the state of partition p under token t, creating it and
// starting its load if needed. OnAcquired creates it: the node admits
// requests for a partition only once OnAcquired has returned (unless its
// acquired timeout passed first), so a request finds the state there,
// loading or loaded. A request starts the load itself when the state was
// dropped after a failed commit (invalidate), or when OnAcquired was late.
func (s *store) partition(p int, t fence.Token) (*partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.parts[p]
	if cur != nil && cur.token.Epoch == t.Epoch {
		return cur, nil
	}
	if t.Epoch <= s.ended[p] || (cur != nil && cur.token.Epoch > t.Epoch) {
		return nil, fmt.Errorf("partition %d: tenure at epoch %d is over: %w", p, t.Epoch, ownership.ErrMoved)
	}
	part := &partition{p: p, token: t, loaded: make(chan struct{})}
	s.parts[p] = part
	go s.load(part)
	return part, nil
}

// release drops partition p's memory at the end of the tenure under t.
func (s *store) release(p int, t fence.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended[p] = max(s.ended[p], t.Epoch)
	if cur := s.parts[p]; cur != nil && cur.token.Epoch <= t.Epoch {
		cur.kill(fmt.Errorf("partition %d: tenure at epoch %d ended: %w", p, t.Epoch, ownership.ErrMoved))
		delete(s.parts, p)
		s.metrics.keys.Sub(float64(cur.size()))
	}
}

// invalidate drops part's memory after a transaction whose outcome is
// unknown: the next request loads the partition again from the database.
func (s *store) invalidate(part *partition) {
	part.kill(errInvalidated)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[part.p] == part {
		delete(s.parts, part.p)
		s.metrics.keys.Sub(float64(part.size()))
	}
}

func (s *store) load(part *partition) {
	defer close(part.loaded)
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	began := time.Now()
	var values map[string]int64
	var seq int64
	var err error
	kind := "full"
	if snap := s.takeStaged(part.p); snap != nil {
		kind = "catchup"
		values, seq, err = s.catchUp(ctx, part.p, snap)
	} else {
		values, seq, err = s.read(ctx, part.p, -1)
		if err == nil {
			s.metrics.loads.WithLabelValues("full").Inc()
			s.metrics.rowsLoaded.WithLabelValues("full").Add(float64(len(values)))
		}
	}
	if err != nil {
		part.err = fmt.Errorf("load partition %d: %w", part.p, err)
		s.log.Warn("load failed", "partition", part.p, "error", err)
		s.invalidate(part)
		return
	}
	part.mu.Lock()
	part.values, part.seq, part.prepared = values, seq, kind == "catchup"
	part.mu.Unlock()
	s.metrics.keys.Add(float64(len(values)))
	s.log.Trace("loaded", "partition", part.p, "epoch", part.token.Epoch, "kind", kind, "keys", len(values), "took", time.Since(began))
}

// read returns the counters of partition p whose seq is above since (-1:
// all of them) and the highest seq among them (since if none).
func (s *store) read(ctx context.Context, p int, since int64) (map[string]int64, int64, error) {
	ph := s.dialect.Placeholder
	rows, err := s.db.QueryContext(ctx, "SELECT key, value, seq FROM "+countersTable+" WHERE partition = "+ph(1)+" AND seq > "+ph(2), p, since)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	values := make(map[string]int64)
	top := max(since, 0)
	for rows.Next() {
		var k string
		var v, seq int64
		if err := rows.Scan(&k, &v, &seq); err != nil {
			return nil, 0, err
		}
		values[k] = v
		top = max(top, seq)
	}
	return values, top, rows.Err()
}

// countRead counts a read of key in part, once loaded, if it is the first
// of key in part's tenure: a hit of the warm handoff if the tenure's state
// was prepared before the claim, a cold read if it was loaded after it.
// Only the keys that have a value are counted, so that the keys remembered
// are at most those in memory (a client's reads of made-up keys add none).
func (s *store) countRead(part *partition, key string) {
	part.mu.Lock()
	_, again := part.read[key]
	if _, has := part.values[key]; !has {
		again = true
	}
	if !again {
		if part.read == nil {
			part.read = make(map[string]struct{})
		}
		part.read[key] = struct{}{}
	}
	prepared := part.prepared
	part.mu.Unlock()
	switch {
	case again:
	case prepared:
		s.metrics.preparedHits.Inc()
	default:
		s.metrics.coldReads.Inc()
	}
}

// ready waits until part is loaded, or ctx ends.
func (s *store) ready(ctx context.Context, part *partition) error {
	select {
	case <-part.loaded:
		return part.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
