package counterdb

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
	"github.com/tenure-go/tenure/ownership/ring"
)

// loadTimeout bounds the query that loads a partition's counters.
const loadTimeout = 10 * time.Second

// errInvalidated reports an increment queued for a partition whose memory
// was dropped after a failed transaction of unknown outcome: the caller
// retries with the same idempotency key, and the partition is loaded again
// from the database.
var errInvalidated = errors.New("counter: partition state invalidated after a failed commit; retry")

// Partition is one partition's counters in memory, under one tenure (one
// token). The owner is the only writer of its partitions, so the memory is
// the truth once loaded: it changes only after a commit succeeded.
type Partition struct {
	p      int
	count  int // the partition count p counts by (ownership.Event.Partitions): its keys are one range of slots (slot.go)
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

// Value returns key's committed value (0 if it has none).
func (p *Partition) Value(key string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[key]
}

func (p *Partition) lastSeq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

func (p *Partition) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.values)
}

// Number returns the partition's number.
func (p *Partition) Number() int { return p.p }

// Failure returns the error that ended p's tenure, or nil while it lasts.
func (p *Partition) Failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// refusedStale records that the database refused an increment of the
// partition with se: the tenure is over (if nothing ended it before), and
// it reports whether this is the partition's first stale refusal, which
// is logged even when the tenure's end was known before (its release
// callback ran first).
func (p *Partition) refusedStale(se *fence.StaleError) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = se
	}
	first, p.stale = !p.stale, true
	return first
}

// kill ends the partition's tenure with err, unless it has ended.
func (p *Partition) kill(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = err
	}
}

// Store keeps the counters of the partitions this node owns. It is safe for
// concurrent use.
type Store struct {
	db      *sql.DB
	dialect sqlfence.Dialect
	fences  *sqlfence.Fences
	log     hclog.Logger
	metrics *Metrics

	mu       sync.Mutex
	parts    map[int]*Partition
	acquired map[int]tenure    // per partition, the tenure OnAcquired started last
	ended    map[int]int64     // per partition, the highest epoch whose tenure ended here
	staged   map[int]*snapshot // per partition, a preparation's snapshot (prepare.go)
	warm     bool              // prepare partitions before their claim (OnPrepare)

	preparing chan struct{} // the preparations reading now (prepare.go)
	reading   chan struct{} // the reads of counters now (read)
}

// NewStore returns a store of the counters in db, whose floors fences
// keeps; warm turns the prepare phase on (Callbacks' OnPrepare).
func NewStore(db *sql.DB, dialect sqlfence.Dialect, fences *sqlfence.Fences, log hclog.Logger, m *Metrics, warm bool) *Store {
	return &Store{
		db: db, dialect: dialect, fences: fences, log: log, metrics: m,
		parts: make(map[int]*Partition), acquired: make(map[int]tenure), ended: make(map[int]int64), staged: make(map[int]*snapshot), warm: warm,
		preparing: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		reading:   make(chan struct{}, readSlots(db)),
	}
}

// reservedConns is the number of db's connections that reads of counters
// leave to writes: the committer's transaction and a fence raise, both
// on the critical path of a request (a fence raise, of every request of a
// partition that moves here), neither of which may wait for a load.
const reservedConns = 2

// readSlots returns how many reads of counters (loads, catch-ups and
// preparations) may run at once on db: its connections but reservedConns,
// at least one; maxUnboundedReads on a pool without a bound.
func readSlots(db *sql.DB) int {
	n := db.Stats().MaxOpenConnections
	if n <= 0 {
		n = maxUnboundedReads
	}
	return max(1, n-reservedConns)
}

// maxUnboundedReads bounds the reads of counters on a pool without a
// bound on its connections.
const maxUnboundedReads = 32

// tenure is a tenure as OnAcquired told it: its epoch, and the partition
// count its partition counts by.
type tenure struct {
	epoch int64
	count int
}

// Callbacks are the node's: a new tenure starts loading its partition at
// once (the node has raised the partition's floor in the database before,
// so the previous owner's last commit is visible and nothing of it can
// commit later), from the snapshot its preparation staged if there is one
// (prepare.go); an ended tenure drops the partition's memory. OnAcquired
// starts the load and returns: loads of the partitions acquired together
// run in parallel, and each request waits for its partition's (ready).
func (s *Store) Callbacks() ownership.Callbacks {
	var prepare func(ownership.Event) error
	if s.warm {
		prepare = s.prepare
	}
	return ownership.Callbacks{
		OnPrepare: prepare,
		OnAcquired: func(e ownership.Event) {
			p, t := e.Partition, e.Token
			s.metrics.owned.Inc()
			s.acquire(p, t, e.Partitions, !e.Prepared.IsZero())
			s.log.Debug("acquired", "partition", p, "partitions", e.Partitions, "epoch", t.Epoch, "prepared", !e.Prepared.IsZero())
		},
		OnReleased: func(e ownership.Event) {
			p, t, r := e.Partition, e.Token, e.Reason
			s.metrics.owned.Dec()
			s.release(p, t)
			s.log.Debug("released", "partition", p, "epoch", t.Epoch, "reason", r)
		},
	}
}

// acquire records the tenure of partition p under token t, whose
// partition counts by count, and starts loading its counters
// (OnAcquired). Unless the node prepared p right before this tenure's
// claim (prepared), a snapshot staged for p is dropped: it is from a
// preparation whose move did not happen, and the writes since may carry
// seqs below its own, under a shape of the fleet that changed meanwhile
// (prepare.go).
func (s *Store) acquire(p int, t fence.Token, count int, prepared bool) {
	s.mu.Lock()
	if cur, ok := s.acquired[p]; !ok || cur.epoch < t.Epoch {
		s.acquired[p] = tenure{epoch: t.Epoch, count: count}
	}
	if !prepared {
		delete(s.staged, p)
	}
	s.mu.Unlock()
	_, _ = s.partition(p, t)
}

// partition returns the state of partition p under token t, creating it and
// starting its load if needed. OnAcquired creates it: the node admits
// requests for a partition only once OnAcquired has returned (unless its
// acquired timeout passed first), so a request finds the state there,
// loading or loaded. A request starts the load itself when the state was
// dropped after a failed commit (invalidate). A request that comes before
// OnAcquired (its timeout passed) is refused with the retryable answer:
// the partition count the tenure counts by, and so the keys to load, are
// known from OnAcquired only.
func (s *Store) partition(p int, t fence.Token) (*Partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.parts[p]
	if cur != nil && cur.token.Epoch == t.Epoch {
		return cur, nil
	}
	if t.Epoch <= s.ended[p] || (cur != nil && cur.token.Epoch > t.Epoch) {
		return nil, fmt.Errorf("partition %d: tenure at epoch %d is over: %w", p, t.Epoch, ownership.ErrMoved)
	}
	ten, ok := s.acquired[p]
	if !ok || ten.epoch != t.Epoch {
		return nil, fmt.Errorf("partition %d: tenure at epoch %d not started here yet: %w", p, t.Epoch, ownership.ErrMoved)
	}
	part := &Partition{p: p, count: ten.count, token: t, loaded: make(chan struct{})}
	s.parts[p] = part
	go s.load(part)
	return part, nil
}

// release drops partition p's memory at the end of the tenure under t.
func (s *Store) release(p int, t fence.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended[p] = max(s.ended[p], t.Epoch)
	if cur, ok := s.acquired[p]; ok && cur.epoch <= t.Epoch {
		delete(s.acquired, p)
	}
	if cur := s.parts[p]; cur != nil && cur.token.Epoch <= t.Epoch {
		cur.kill(fmt.Errorf("partition %d: tenure at epoch %d ended: %w", p, t.Epoch, ownership.ErrMoved))
		delete(s.parts, p)
		s.metrics.keys.Sub(float64(cur.size()))
	}
}

// invalidate drops part's memory after a transaction whose outcome is
// unknown: the next request loads the partition again from the database.
func (s *Store) invalidate(part *Partition) {
	part.kill(errInvalidated)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[part.p] == part {
		delete(s.parts, part.p)
		s.metrics.keys.Sub(float64(part.size()))
	}
}

func (s *Store) load(part *Partition) {
	defer close(part.loaded)
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	began := time.Now()
	var values map[string]int64
	var seq int64
	var err error
	kind := "full"
	if snap := s.takeStaged(part.p, part.count); snap != nil {
		kind = "catchup"
		values, seq, err = s.catchUp(ctx, part.p, part.count, snap)
	} else {
		values, seq, err = s.read(ctx, part.p, part.count, -1)
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
	s.log.Trace("loaded", "partition", part.p, "partitions", part.count, "epoch", part.token.Epoch, "kind", kind, "keys", len(values), "took", time.Since(began))
}

// read returns the counters of partition p under count partitions whose
// seq is above since (-1: all of them) and the highest seq among them
// (since if none): the rows of p's range of slots (slot.go).
func (s *Store) read(ctx context.Context, p, count int, since int64) (map[string]int64, int64, error) {
	lo, hi, err := slotRange(p, count)
	if err != nil {
		return nil, 0, err
	}
	select {
	case s.reading <- struct{}{}:
		defer func() { <-s.reading }()
	case <-ctx.Done():
		return nil, 0, context.Cause(ctx)
	}
	ph := s.dialect.Placeholder
	rows, err := s.db.QueryContext(ctx, "SELECT key, value, seq FROM "+CountersTable+" WHERE slot >= "+ph(1)+" AND slot < "+ph(2)+" AND seq > "+ph(3), lo, hi, since)
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
func (s *Store) countRead(part *Partition, key string) {
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
func (s *Store) ready(ctx context.Context, part *Partition) error {
	select {
	case <-part.loaded:
		return part.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Serve returns the state of the partition that token t fences (its scope
// is fence.PartitionScope's), loaded, for a request for key that the node
// admitted under t, and counts the read (countRead). It waits for the
// load, or until ctx ends. A tenure that is over or not started here yet
// is refused with ownership.ErrMoved (the retryable answer); a key that is
// not in the partition is an error, a bug of the caller, never a move.
func (s *Store) Serve(ctx context.Context, t fence.Token, key string) (*Partition, error) {
	var p int
	if _, err := fmt.Sscanf(t.Scope, "p/%d", &p); err != nil || fence.PartitionScope(p) != t.Scope {
		return nil, fmt.Errorf("token scope %q names no partition", t.Scope)
	}
	part, err := s.partition(p, t)
	if err == nil {
		err = s.ready(ctx, part)
	}
	if err != nil {
		return nil, err
	}
	if ring.PartitionOf(key, part.count) != p {
		return nil, fmt.Errorf("key %q is not in partition %d of %d", key, p, part.count)
	}
	s.countRead(part, key)
	return part, nil
}
