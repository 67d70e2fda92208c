package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// commitTimeout bounds one commit's transaction. It deliberately does not
// follow the request's or the partition's context: once a batch has begun,
// the database decides (a stale token is refused there), and cancelling it
// would only turn a definite answer into an unknown outcome.
const commitTimeout = 10 * time.Second

// maxParams bounds the parameters of one multi-row statement (SQLite's
// default limit is 32766, PostgreSQL's 65535).
const maxParams = 30000

// errKeyReused reports an idempotency key that was applied to another
// counter: a client bug, answered 422 and not retried.
var errKeyReused = errors.New("idempotency key already used for another counter")

// incr is one increment waiting for its commit.
type incr struct {
	part *partition
	key  string
	idem string
	done chan result // buffered: the committer never blocks on it
}

// result is an increment's outcome: the counter's value after it, and
// whether it had been applied before (a retry).
type result struct {
	value int64
	dup   bool
	err   error
}

// committer writes increments through to the database. With group commit,
// one goroutine takes every increment queued while the previous transaction
// was in flight and commits them in one transaction; without it, each
// increment commits in a transaction of its own, one at a time per
// partition.
type committer struct {
	store    *store
	node     string
	group    bool
	maxBatch int
	hold     time.Duration
	log      hclog.Logger

	queue chan *incr
	stop  chan struct{}
	done  chan struct{}
}

func newCommitter(s *store, node string, group bool, maxBatch int, hold time.Duration, log hclog.Logger) *committer {
	c := &committer{
		store: s, node: node, group: group, maxBatch: maxBatch, hold: hold, log: log,
		queue: make(chan *incr, 4*maxBatch), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if group {
		go c.run()
	} else {
		close(c.done)
	}
	return c
}

// close stops the committer once the increments queued so far are
// committed. Call it after the last increment was submitted.
func (c *committer) close() {
	if c.group {
		close(c.stop)
	}
	<-c.done
}

// submit commits one increment of key under part's token and returns its
// result. It waits for the answer whatever happens to the request: the
// database decides.
func (c *committer) submit(part *partition, key, idem string) result {
	in := &incr{part: part, key: key, idem: idem, done: make(chan result, 1)}
	if !c.group {
		part.serial.Lock()
		defer part.serial.Unlock()
		c.commit([]*incr{in})
		return <-in.done
	}
	c.queue <- in
	return <-in.done
}

func (c *committer) run() {
	defer close(c.done)
	batch := make([]*incr, 0, c.maxBatch)
	for {
		var first *incr
		select {
		case first = <-c.queue:
		case <-c.stop:
			select {
			case first = <-c.queue:
			default:
				return
			}
		}
		batch = append(batch[:0], first)
	gather:
		for len(batch) < c.maxBatch {
			select {
			case in := <-c.queue:
				batch = append(batch, in)
			default:
				break gather
			}
		}
		c.commit(batch)
	}
}

// commit runs one transaction for batch and answers every increment of it.
//
// In the transaction: the tokens of the batch's partitions are advanced
// once each (sqlfence.Fences.AdvanceAll); the increments of partitions whose
// token is stale fail with the *fence.StaleError (the caller retries at the
// next owner) and the rest go on. The idempotency keys already applied are
// read, and those increments answer with their stored result; the others
// get the next value of their counter, one row each in the increments table
// (whose primary key refuses an idempotency key applied twice), and every
// counter touched gets its new value. Memory changes only after the commit.
func (c *committer) commit(batch []*incr) {
	m := c.store.metrics
	live := batch[:0:0]
	for _, in := range batch {
		if err := in.part.failure(); err != nil {
			in.done <- result{err: err}
			continue
		}
		live = append(live, in)
	}
	if len(live) == 0 {
		return
	}
	if c.hold > 0 {
		// Demonstration knob: a pause (SIGSTOP) is likely to fall here,
		// after the increments were admitted and before they commit.
		c.log.Info("holding before the commit", "increments", len(live), "hold", c.hold)
		time.Sleep(c.hold)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	res, err := c.transact(ctx, live)
	m.commitSeconds.Observe(time.Since(began).Seconds())
	if err != nil {
		// The outcome is unknown (a failed commit may have committed):
		// drop the memory of the partitions involved, so that they are
		// loaded again, and let the callers retry with their keys.
		m.commitFailures.Inc()
		c.log.Warn("commit failed", "increments", len(live), "error", err)
		seen := make(map[*partition]bool)
		for _, in := range live {
			if !seen[in.part] {
				seen[in.part] = true
				c.store.invalidate(in.part)
			}
			in.done <- result{err: err}
		}
		return
	}
	m.batches.Inc()
	m.batchSize.Observe(float64(len(live)))
	for i, in := range live {
		r := res[i]
		switch {
		case errors.Is(r.err, fence.ErrStale):
			m.stale.Inc()
		case r.err != nil: // an idempotency key reused for another counter
		case r.dup:
			m.duplicates.Inc()
		default:
			m.applied.Inc()
		}
		in.done <- r
	}
}

// transact runs the transaction of commit and returns one result per
// increment, or an error if the transaction failed as a whole.
func (c *committer) transact(ctx context.Context, batch []*incr) ([]result, error) {
	s := c.store
	res := make([]result, len(batch))

	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	// 1. Advance every distinct token once.
	var tokens []fence.Token
	parts := make(map[string]*partition)
	for _, in := range batch {
		if _, ok := parts[in.part.token.Scope]; !ok {
			parts[in.part.token.Scope] = in.part
			tokens = append(tokens, in.part.token)
		}
	}
	staleBy := make(map[*partition]*fence.StaleError)
	if err := s.fences.AdvanceAll(ctx, tx, tokens); err != nil {
		var ste *sqlfence.StaleTokensError
		if !errors.As(err, &ste) {
			return nil, fmt.Errorf("advance: %w", err)
		}
		for _, se := range ste.Stale {
			part := parts[se.Scope]
			staleBy[part] = se
			part.kill(se)
			c.log.Warn("stale increments rejected", "partition", part.p, "epoch", se.Presented, "current_epoch", se.Current)
		}
	}

	// 2. Which idempotency keys were applied already?
	var ids []string
	for i, in := range batch {
		if se := staleBy[in.part]; se != nil {
			res[i].err = se
			continue
		}
		ids = append(ids, in.idem)
	}
	prior, err := c.applied(ctx, tx, ids)
	if err != nil {
		return nil, err
	}

	// 3. Compute the new values, in arrival order.
	type row struct {
		idem, key string
		value     int64
		epoch     int64
	}
	var rows []row
	next := make(map[string]int64)         // key -> value after this batch
	keyPart := make(map[string]*partition) // key -> its partition
	for i, in := range batch {
		if res[i].err != nil {
			continue
		}
		if pr, ok := prior[in.idem]; ok {
			if pr.key != in.key {
				res[i] = result{err: fmt.Errorf("%w: %q was applied to %q", errKeyReused, in.idem, pr.key)}
				continue
			}
			res[i] = result{value: pr.value, dup: true}
			continue
		}
		cur, ok := next[in.key]
		if !ok {
			cur = in.part.value(in.key)
		}
		cur++
		next[in.key] = cur
		keyPart[in.key] = in.part
		prior[in.idem] = applied{in.key, cur} // a second attempt in the same batch is a duplicate
		res[i] = result{value: cur}
		rows = append(rows, row{in.idem, in.key, cur, in.part.token.Epoch})
	}

	// 4. Write the increments and the counters.
	now := time.Now().UnixMilli()
	if err := c.insertMany(ctx, tx, "INSERT INTO "+incrementsTable+" (idem, key, value, epoch, node, applied_at) VALUES ", "", 6, len(rows),
		func(i int) []any { r := rows[i]; return []any{r.idem, r.key, r.value, r.epoch, c.node, now} }); err != nil {
		return nil, fmt.Errorf("insert increments: %w", err)
	}
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one lock order on PostgreSQL
	if err := c.insertMany(ctx, tx, "INSERT INTO "+countersTable+" (key, partition, value, epoch) VALUES ",
		" ON CONFLICT (key) DO UPDATE SET value = excluded.value, epoch = excluded.epoch", 4, len(keys),
		func(i int) []any {
			k := keys[i]
			part := keyPart[k]
			return []any{k, part.p, next[k], part.token.Epoch}
		}); err != nil {
		return nil, fmt.Errorf("write counters: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}

	// 5. Committed: memory follows.
	for _, k := range keys {
		part := keyPart[k]
		part.mu.Lock()
		if part.values != nil {
			if _, had := part.values[k]; !had {
				s.metrics.keys.Inc()
			}
			part.values[k] = next[k]
		}
		part.mu.Unlock()
	}
	return res, nil
}

// applied is the stored result of an applied increment: its counter and
// the value it produced.
type applied struct {
	key   string
	value int64
}

// applied returns the stored results of the idempotency keys ids that were
// applied already.
func (c *committer) applied(ctx context.Context, tx *sql.Tx, ids []string) (map[string]applied, error) {
	out := make(map[string]applied)
	ph := c.store.dialect.Placeholder
	for len(ids) > 0 {
		n := min(len(ids), maxParams)
		var q strings.Builder
		q.WriteString("SELECT idem, key, value FROM " + incrementsTable + " WHERE idem IN (")
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
func (c *committer) insertMany(ctx context.Context, tx *sql.Tx, head, tail string, cols, n int, row func(int) []any) error {
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
