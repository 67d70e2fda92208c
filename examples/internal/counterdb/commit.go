package counterdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// commitTimeout bounds one increment's transaction without group commit
// (with it, sqlfence.BatcherConfig.Timeout bounds a batch's). It does not
// follow the request's context: the database decides, and cancelling would
// only turn a definite answer into an unknown outcome.
const commitTimeout = 10 * time.Second

// maxParams bounds the parameters of one multi-row statement (SQLite's
// default limit is 32766, PostgreSQL's 65535).
const maxParams = 30000

// ErrKeyReused reports an idempotency key that was applied to another
// counter: a client bug, answered as such and not retried.
var ErrKeyReused = errors.New("idempotency key already used for another counter")

// incr is one increment waiting for its commit.
type incr struct {
	part  *Partition
	key   string
	idem  string
	delta int64
	seq   int64 // the seq its write stamps on its counter (see prepare.go)
}

// Result is an increment's outcome: the counter's value after it, and
// whether it had been applied before (a retry).
type Result struct {
	Value int64
	Dup   bool  // the idempotency key had been applied: Value is its stored result
	Err   error // a *fence.StaleError, ErrKeyReused, or a failed commit (retry with the same key)
}

// Committer writes increments through to the database. With group commit,
// a sqlfence.Batcher commits every increment queued while the previous
// transaction was in flight in one transaction; without it, each increment
// commits in a fenced transaction of its own, one at a time per partition.
// Either way the transaction runs write, and committed brings memory up to
// date once it has committed.
type Committer struct {
	store   *Store
	node    string
	hold    time.Duration
	log     hclog.Logger
	batcher *sqlfence.Batcher[*incr, Result] // nil without group commit

	// With hold: holding admits one hold at a time, and quiet keeps
	// commits out of it (a commit read-locks quiet, a hold write-locks it).
	holding sync.Mutex
	quiet   sync.RWMutex
}

// NewCommitter returns the committer of s's increments, which records node
// as the node that applied them: with group commit (group), up to maxBatch
// increments per transaction; hold is the --hold demonstration knob (0:
// off).
func NewCommitter(s *Store, node string, group bool, maxBatch int, hold time.Duration, log hclog.Logger) (*Committer, error) {
	c := &Committer{store: s, node: node, hold: hold, log: log}
	if group {
		b, err := sqlfence.NewBatcher(s.db, s.fences, sqlfence.Writer[*incr, Result]{Write: c.write, Committed: c.committed},
			sqlfence.BatcherConfig{MaxBatch: maxBatch, Timeout: commitTimeout})
		if err != nil {
			return nil, err
		}
		c.batcher = b
	}
	return c, nil
}

// Close stops the committer once the increments queued so far are
// committed. Call it after the last increment was submitted.
func (c *Committer) Close() {
	if c.batcher != nil {
		c.batcher.Close()
	}
}

// Submit adds delta to key's counter under part's token, once per
// idempotency key idem, and returns its result. It waits for the answer
// whatever happens to the request: the database decides. A stale token ends the partition's tenure here: every
// later increment of it fails without a transaction.
func (c *Committer) Submit(part *Partition, key, idem string, delta int64) Result {
	if err := part.Failure(); err != nil {
		return Result{Err: err}
	}
	if c.hold > 0 {
		c.holdOne()
		c.quiet.RLock()
	}
	m := c.store.metrics
	in := &incr{part: part, key: key, idem: idem, delta: delta}
	began := time.Now()
	r, err := c.commit(in)
	if c.hold > 0 {
		c.quiet.RUnlock()
	}
	m.commitSeconds.Observe(time.Since(began).Seconds())
	var se *fence.StaleError
	switch {
	case errors.As(err, &se):
		m.stale.Inc()
		if part.refusedStale(se) {
			c.log.Warn("stale increments rejected", "partition", part.p, "epoch", se.Presented, "current_epoch", se.Current)
		}
		return Result{Err: err}
	case err != nil:
		// The outcome is unknown (a failed commit may have committed):
		// drop the partition's memory, so that it is loaded again, and
		// let the caller retry with its key.
		m.commitFailures.Inc()
		c.log.Warn("commit failed", "partition", part.p, "error", err)
		c.store.invalidate(part)
		return Result{Err: err}
	case r.Err != nil: // an idempotency key reused for another counter
	case r.Dup:
		m.duplicates.Inc()
	default:
		m.applied.Inc()
	}
	return r
}

// holdOne is the --hold demonstration knob: one increment at a time,
// admitted and not yet committed, waits hold before its commit, while no
// transaction of this process is in flight and none begins. A pause
// (SIGSTOP) is likely to fall in that wait, where the process holds no
// database lock: a process stopped inside a SQLite write transaction keeps
// the database's write lock, and every other process waits on it.
func (c *Committer) holdOne() {
	if !c.holding.TryLock() {
		return
	}
	defer c.holding.Unlock()
	c.quiet.Lock()
	defer c.quiet.Unlock()
	c.log.Info("holding before the commit", "hold", c.hold)
	time.Sleep(c.hold)
}

// commit runs in through the Batcher, or in a transaction of its own.
func (c *Committer) commit(in *incr) (Result, error) {
	if c.batcher != nil {
		return c.batcher.Do(context.Background(), in.part.token, in)
	}
	in.part.serial.Lock()
	defer in.part.serial.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	batch := []*incr{in}
	var res []Result
	err := c.store.fences.Do(ctx, c.store.db, in.part.token, func(tx *sql.Tx) error {
		var err error
		res, err = c.write(ctx, tx, batch)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	c.committed(batch, res)
	return res[0], nil
}

// write writes batch, whose tokens the transaction tx has admitted, and
// returns one result per increment, in arrival order. The idempotency keys
// already applied are read, and those increments answer with their stored
// result; the others get the next value of their counter, one row each in
// the increments table (whose primary key refuses an idempotency key
// applied twice), and every counter touched gets its new value.
func (c *Committer) write(ctx context.Context, tx *sql.Tx, batch []*incr) ([]Result, error) {
	res := make([]Result, len(batch))
	ids := make([]string, len(batch))
	for i, in := range batch {
		ids[i] = in.idem
	}
	prior, err := c.applied(ctx, tx, ids)
	if err != nil {
		return nil, err
	}

	type row struct {
		idem, key string
		value     int64
		epoch     int64
	}
	var rows []row
	next := make(map[string]int64)         // key -> value after this batch
	seqs := make(map[*Partition]int64)     // partition -> the seq of this batch's writes
	keyPart := make(map[string]*Partition) // key -> its partition
	for i, in := range batch {
		if pr, ok := prior[in.idem]; ok {
			if pr.key != in.key {
				res[i] = Result{Err: fmt.Errorf("%w: %q was applied to %q", ErrKeyReused, in.idem, pr.key)}
				continue
			}
			res[i] = Result{Value: pr.value, Dup: true}
			continue
		}
		cur, ok := next[in.key]
		if !ok {
			cur = in.part.Value(in.key)
		}
		cur += in.delta
		next[in.key] = cur
		keyPart[in.key] = in.part
		if _, ok := seqs[in.part]; !ok {
			seqs[in.part] = in.part.lastSeq() + 1 // the partition's commits are one at a time
		}
		in.seq = seqs[in.part]
		prior[in.idem] = applied{in.key, cur} // a second attempt in the same batch is a duplicate
		res[i] = Result{Value: cur}
		rows = append(rows, row{in.idem, in.key, cur, in.part.token.Epoch})
	}

	now := time.Now().UnixMilli()
	if err := c.insertMany(ctx, tx, "INSERT INTO "+IncrementsTable+" (idem, key, value, epoch, node, applied_at) VALUES ", "", 6, len(rows),
		func(i int) []any { r := rows[i]; return []any{r.idem, r.key, r.value, r.epoch, c.node, now} }); err != nil {
		return nil, fmt.Errorf("insert increments: %w", err)
	}
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one lock order on PostgreSQL
	if err := c.insertMany(ctx, tx, "INSERT INTO "+CountersTable+" (key, partition, slot, value, epoch, seq) VALUES ",
		" ON CONFLICT (key) DO UPDATE SET partition = excluded.partition, slot = excluded.slot, value = excluded.value, epoch = excluded.epoch, seq = excluded.seq", 6, len(keys),
		func(i int) []any {
			k := keys[i]
			part := keyPart[k]
			return []any{k, part.p, SlotOf(k), next[k], part.token.Epoch, seqs[part]}
		}); err != nil {
		return nil, fmt.Errorf("write counters: %w", err)
	}
	return res, nil
}

// committed brings memory up to date with a committed batch, before the
// next batch reads it, and counts the transaction.
func (c *Committer) committed(batch []*incr, res []Result) {
	m := c.store.metrics
	m.batches.Inc()
	m.batchSize.Observe(float64(len(batch)))
	for i, in := range batch {
		if res[i].Err != nil || res[i].Dup {
			continue
		}
		part := in.part
		part.mu.Lock()
		part.seq = max(part.seq, in.seq)
		if part.values != nil {
			if _, had := part.values[in.key]; !had {
				m.keys.Inc()
			}
			part.values[in.key] = res[i].Value // in arrival order: the last is the highest
		}
		part.mu.Unlock()
	}
}

// applied is the stored result of an applied increment: its counter and
// the value it produced.
type applied struct {
	key   string
	value int64
}

// applied returns the stored results of the idempotency keys ids that were
// applied already.
func (c *Committer) applied(ctx context.Context, tx *sql.Tx, ids []string) (map[string]applied, error) {
	out := make(map[string]applied)
	ph := c.store.dialect.Placeholder
	for len(ids) > 0 {
		n := min(len(ids), maxParams)
		var q strings.Builder
		q.WriteString("SELECT idem, key, value FROM " + IncrementsTable + " WHERE idem IN (")
		args := make([]any, n)
		for i := range n {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(ph(i + 1))
			args[i] = ids[i]
		}
		q.WriteString(")")
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("read applied increments: %w", err)
		}
		for rows.Next() {
			var id string
			var a applied
			if err := rows.Scan(&id, &a.key, &a.value); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read applied increments: %w", err)
			}
			out[id] = a
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read applied increments: %w", err)
		}
		ids = ids[n:]
	}
	return out, nil
}

// insertMany runs head VALUES (...), (...) tail for n rows of cols columns
// each, as few statements as the parameter limit allows.
func (c *Committer) insertMany(ctx context.Context, tx *sql.Tx, head, tail string, cols, n int, row func(int) []any) error {
	ph := c.store.dialect.Placeholder
	per := maxParams / cols
	for start := 0; start < n; start += per {
		end := min(n, start+per)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, (end-start)*cols)
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString("(")
			for j := range cols {
				if j > 0 {
					q.WriteString(", ")
				}
				q.WriteString(ph(len(args) + j + 1))
			}
			q.WriteString(")")
			args = append(args, row(i)...)
		}
		q.WriteString(tail)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}
