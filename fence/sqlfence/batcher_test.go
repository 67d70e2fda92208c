package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// counts is a test Writer's state: a table of counters, one row per key,
// each write bumping its key by one and answering the key's new value, as
// a lone transaction running the same statement would.
type counts struct {
	e     engine
	table string

	mu      sync.Mutex
	batches [][]string // the writes of each committed batch
	hold    chan struct{}
	held    chan struct{} // closed when a Write waits on hold
}

func newCounts(t *testing.T, e engine, table string) *counts {
	t.Helper()
	freshTable(t, e.db, table, "CREATE TABLE "+table+" (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
	return &counts{e: e, table: table}
}

// holdNext makes the next Write wait until the returned function is
// called; held is closed once it waits.
func (c *counts) holdNext() (held <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold, c.held = make(chan struct{}), make(chan struct{})
	h := c.hold
	return c.held, func() { close(h) }
}

func (c *counts) writer() sqlfence.Writer[string, int64] {
	bump := "INSERT INTO " + c.table + " AS c (k, n) VALUES (" + c.e.ph(1) + ", 1) ON CONFLICT (k) DO UPDATE SET n = c.n + 1 RETURNING n"
	return sqlfence.Writer[string, int64]{
		Write: func(ctx context.Context, tx *sql.Tx, batch []string) ([]int64, error) {
			c.mu.Lock()
			hold, held := c.hold, c.held
			c.hold, c.held = nil, nil
			c.mu.Unlock()
			if hold != nil {
				close(held)
				<-hold
			}
			out := make([]int64, len(batch))
			for i, k := range batch {
				if err := tx.QueryRowContext(ctx, bump, k).Scan(&out[i]); err != nil {
					return nil, err
				}
			}
			return out, nil
		},
		Committed: func(batch []string, _ []int64) {
			c.mu.Lock()
			c.batches = append(c.batches, batch)
			c.mu.Unlock()
		},
	}
}

func (c *counts) value(t *testing.T, k string) int64 {
	t.Helper()
	var n int64
	err := c.e.db.QueryRowContext(context.Background(), "SELECT n FROM "+c.table+" WHERE k = "+c.e.ph(1), k).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func newBatcher(t *testing.T, e engine, c *counts) *sqlfence.Batcher[string, int64] {
	t.Helper()
	b, err := sqlfence.NewBatcher(e.db, e.fences, c.writer(), sqlfence.DefaultBatcherConfig())
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// waitQueued waits until n writes queue in b.
func waitQueued(t *testing.T, b *sqlfence.Batcher[string, int64], n int) {
	t.Helper()
	require.Eventually(t, func() bool { return sqlfence.Queued(b) == n }, time.Minute, time.Millisecond)
}

func tok(scope string, epoch int64) fence.Token { return fence.Token{Scope: scope, Epoch: epoch} }

// TestBatcherConcurrent sends writes from many goroutines under a few
// tokens: every write is counted once, and each caller gets a distinct
// value of its key, as lone transactions would give.
func TestBatcherConcurrent(t *testing.T) {
	for _, e := range engines(t, "bconc") {
		t.Run(e.name, func(t *testing.T) {
			c := newCounts(t, e, "bconc_counts")
			b := newBatcher(t, e, c)
			const n, keys = 200, 4
			type answer struct {
				key string
				v   int64
				err error
			}
			answers := make(chan answer, n)
			for i := range n {
				go func() {
					k := fmt.Sprint("k", i%keys)
					v, err := b.Do(context.Background(), tok(fmt.Sprint("p/", i%keys), 3), k)
					answers <- answer{k, v, err}
				}()
			}
			seen := make(map[answer]bool)
			for range n {
				a := <-answers
				require.NoError(t, a.err)
				assert.False(t, seen[a], "value %d of %s answered twice", a.v, a.key)
				seen[a] = true
			}
			for k := range keys {
				assert.Equal(t, int64(n/keys), c.value(t, fmt.Sprint("k", k)))
			}
			written := 0
			for _, batch := range c.batches {
				written += len(batch)
			}
			assert.Equal(t, n, written)
		})
	}
}

// TestBatcherStale puts a stale write (its scope advanced by a newer
// owner) in one batch with current ones: the stale write alone is refused
// with the scope's current epoch, and Write never sees it. Then another
// connection raises a floor directly in the fences table, as another
// process's fencer would: the next batch refuses the writes under the old
// epoch.
func TestBatcherStale(t *testing.T) {
	ctx := context.Background()
	for _, e := range engines(t, "bstale") {
		t.Run(e.name, func(t *testing.T) {
			c := newCounts(t, e, "bstale_counts")
			b := newBatcher(t, e, c)
			fencer := sqlfence.Fencer{DB: e.db, Fences: e.fences}
			require.NoError(t, fencer.Advance(ctx, tok("p/1", 5)))
			require.NoError(t, fencer.Advance(ctx, tok("p/1", 9)))

			held, release := c.holdNext()
			first := make(chan error, 1)
			go func() { _, err := b.Do(ctx, tok("p/3", 1), "first"); first <- err }()
			<-held
			type answer struct {
				v   int64
				err error
			}
			do := func(t fence.Token, k string) <-chan answer {
				ch := make(chan answer, 1)
				go func() { v, err := b.Do(ctx, t, k); ch <- answer{v, err} }()
				return ch
			}
			old := do(tok("p/1", 5), "a")
			waitQueued(t, b, 1)
			cur := do(tok("p/1", 9), "a")
			waitQueued(t, b, 2)
			other := do(tok("p/2", 3), "b")
			waitQueued(t, b, 3)
			release()
			require.NoError(t, <-first)

			var se *fence.StaleError
			got := <-old
			require.ErrorAs(t, got.err, &se)
			assert.Equal(t, fence.StaleError{Scope: "p/1", Presented: 5, Current: 9}, *se)
			assert.Equal(t, answer{v: 1}, <-cur)
			assert.Equal(t, answer{v: 1}, <-other)
			assert.Equal(t, [][]string{{"first"}, {"a", "b"}}, c.batches)

			// Another connection raises p/2's floor between batches.
			conn, err := e.db.Conn(ctx)
			require.NoError(t, err)
			_, err = conn.ExecContext(ctx, "UPDATE bstale_fences SET epoch = 20 WHERE scope = "+e.ph(1), "p/2")
			require.NoError(t, err)
			require.NoError(t, conn.Close())
			_, err = b.Do(ctx, tok("p/2", 3), "b")
			require.ErrorAs(t, err, &se)
			assert.Equal(t, int64(20), se.Current)
			assert.Equal(t, int64(1), c.value(t, "b"))
			v, err := b.Do(ctx, tok("p/2", 20), "b")
			require.NoError(t, err)
			assert.Equal(t, int64(2), v)
		})
	}
}

// TestBatcherCancel withdraws a write whose context ends while it waits
// for a batch (it is never written), refuses one whose context has ended
// already, and after Close refuses new writes with ErrClosed once the
// queued ones are committed.
func TestBatcherCancel(t *testing.T) {
	for _, e := range engines(t, "bcancel") {
		t.Run(e.name, func(t *testing.T) {
			c := newCounts(t, e, "bcancel_counts")
			b := newBatcher(t, e, c)
			ctx := context.Background()

			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err := b.Do(done, tok("p/1", 1), "never")
			require.ErrorIs(t, err, context.Canceled)

			held, release := c.holdNext()
			first := make(chan error, 1)
			go func() { _, err := b.Do(ctx, tok("p/1", 1), "first"); first <- err }()
			<-held
			wctx, withdraw := context.WithCancel(ctx)
			withdrawn := make(chan error, 1)
			go func() { _, err := b.Do(wctx, tok("p/1", 1), "withdrawn"); withdrawn <- err }()
			waitQueued(t, b, 1)
			queued := make(chan error, 1)
			go func() { _, err := b.Do(ctx, tok("p/1", 1), "queued"); queued <- err }()
			waitQueued(t, b, 2)
			withdraw()
			require.ErrorIs(t, <-withdrawn, context.Canceled)

			closed := make(chan struct{})
			go func() { b.Close(); close(closed) }()
			require.Eventually(t, func() bool {
				_, err := b.Do(done, tok("p/1", 1), "late") // never queued: refused as closed or cancelled
				return errors.Is(err, sqlfence.ErrClosed)
			}, time.Minute, time.Millisecond)
			release()
			<-closed
			require.NoError(t, <-first)
			require.NoError(t, <-queued)
			assert.Equal(t, [][]string{{"first"}, {"queued"}}, c.batches)
			assert.Equal(t, int64(0), c.value(t, "withdrawn"))
			assert.Equal(t, int64(0), c.value(t, "never"))
			assert.Equal(t, int64(0), c.value(t, "late"))
		})
	}
}

// TestBatcherFailure fails a batch whose Write fails, or answers another
// number of results than writes: every write of it gets the error, and
// nothing of it is committed.
func TestBatcherFailure(t *testing.T) {
	e := newSQLite(t, "bfail")
	ctx := context.Background()
	freshTable(t, e.db, "bfail_rows", "CREATE TABLE bfail_rows (k TEXT PRIMARY KEY)")
	boom := errors.New("boom")
	b, err := sqlfence.NewBatcher(e.db, e.fences, sqlfence.Writer[string, int]{
		Write: func(ctx context.Context, tx *sql.Tx, batch []string) ([]int, error) {
			if _, err := tx.ExecContext(ctx, "INSERT INTO bfail_rows (k) VALUES (?)", batch[0]); err != nil {
				return nil, err
			}
			switch batch[0] {
			case "fail":
				return nil, boom
			case "short":
				return nil, nil
			}
			return make([]int, len(batch)), nil
		},
	}, sqlfence.BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Do(ctx, tok("p/1", 1), "fail")
	require.ErrorIs(t, err, boom)
	_, err = b.Do(ctx, tok("p/1", 1), "short")
	require.ErrorIs(t, err, sqlfence.ErrInvalidQuery)
	_, err = b.Do(ctx, tok("p/1", 1), "ok")
	require.NoError(t, err)
	var n int
	require.NoError(t, e.db.QueryRowContext(ctx, "SELECT count(*) FROM bfail_rows").Scan(&n))
	assert.Equal(t, 1, n)
}

// TestBatcherArguments refuses nil collaborators, a bad config, an invalid
// token and a Batcher not made by NewBatcher.
func TestBatcherArguments(t *testing.T) {
	e := newSQLite(t, "bargs")
	w := sqlfence.Writer[string, int]{Write: func(context.Context, *sql.Tx, []string) ([]int, error) { return nil, nil }}
	cfg := sqlfence.DefaultBatcherConfig()
	_, err := sqlfence.NewBatcher(nil, e.fences, w, cfg)
	assert.ErrorIs(t, err, sqlfence.ErrNilArgument)
	_, err = sqlfence.NewBatcher(e.db, nil, w, cfg)
	assert.ErrorIs(t, err, sqlfence.ErrNilArgument)
	_, err = sqlfence.NewBatcher(e.db, e.fences, sqlfence.Writer[string, int]{}, cfg)
	assert.ErrorIs(t, err, sqlfence.ErrNilArgument)
	_, err = sqlfence.NewBatcher(e.db, e.fences, w, sqlfence.BatcherConfig{MaxBatch: -1})
	assert.ErrorIs(t, err, sqlfence.ErrInvalidConfig)
	_, err = sqlfence.NewBatcher(e.db, e.fences, w, sqlfence.BatcherConfig{Timeout: -time.Second})
	assert.ErrorIs(t, err, sqlfence.ErrInvalidConfig)

	b, err := sqlfence.NewBatcher(e.db, e.fences, w, cfg)
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Do(context.Background(), tok("p/1", 0), "x")
	assert.ErrorIs(t, err, fence.ErrInvalidToken)
	var zero sqlfence.Batcher[string, int]
	_, err = zero.Do(context.Background(), tok("p/1", 1), "x")
	assert.ErrorIs(t, err, sqlfence.ErrNilArgument)
	zero.Close()
}

// BenchmarkBatcher compares, on the same table in one run, 64 concurrent
// writers whose writes go through a Batcher ("batched") with the same
// writes each in a fenced transaction of its own ("alone": Fences.Do), on
// PostgreSQL and on SQLite. Each write bumps one of 64 counters under one
// of 8 partitions' tokens.
func BenchmarkBatcher(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		db := postgres(b)
		f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "bbench_fences"})
		require.NoError(b, err)
		mustExec(b, db, "DROP TABLE IF EXISTS bbench_fences")
		require.NoError(b, f.CreateTable(context.Background(), db))
		benchBatcher(b, engine{name: "postgres", db: db, fences: f, dialect: sqlfence.Postgres})
	})
	b.Run("sqlite", func(b *testing.B) { benchBatcher(b, newSQLite(b, "bbench")) })
}

func benchBatcher(b *testing.B, e engine) {
	ctx := context.Background()
	freshTable(b, e.db, "bbench_counts", "CREATE TABLE bbench_counts (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
	c := &counts{e: e, table: "bbench_counts"}
	w := c.writer()
	w.Committed = nil
	fencer := sqlfence.Fencer{DB: e.db, Fences: e.fences}
	const parts = 8
	for p := range parts {
		require.NoError(b, fencer.Advance(ctx, tok(fmt.Sprint("p/", p), 1)))
	}
	bench := func(b *testing.B, write func(t fence.Token, k string) error) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		var next sync.Mutex
		i := 0
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				next.Lock()
				i++
				n := i
				next.Unlock()
				if err := write(tok(fmt.Sprint("p/", n%parts), 1), fmt.Sprint("k", n%64)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("batched", func(b *testing.B) {
		bt, err := sqlfence.NewBatcher(e.db, e.fences, w, sqlfence.DefaultBatcherConfig())
		require.NoError(b, err)
		defer bt.Close()
		bench(b, func(t fence.Token, k string) error { _, err := bt.Do(ctx, t, k); return err })
	})
	b.Run("alone", func(b *testing.B) {
		bench(b, func(t fence.Token, k string) error {
			return e.fences.Do(ctx, e.db, t, func(tx *sql.Tx) error {
				_, err := w.Write(ctx, tx, []string{k})
				return err
			})
		})
	})
}
