package counterdb

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/examples/internal/sqldb"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// The counter's tables. counters holds one row per key with its value and
// its slot (slot.go: a new owner loads a partition, by whatever count the
// fleet uses, with one indexed range query); increments holds one row per
// applied increment, keyed by its idempotency key, with the value it
// produced: a retried increment finds its row and gets the same answer
// instead of a second increment.
const (
	CountersTable   = "counters"
	IncrementsTable = "counter_increments"
	countersIndex   = "counters_by_slot" // counters by (slot, seq), covering key and value: a load, a catch-up, a preparation
)

// countersIndexColumns are the index's columns. A load reads a range of
// slots (and seqs) for each row's key and value: with both in the index,
// it reads the index alone, not the table row by row (on SQLite about a
// third of the CPU per row: BenchmarkReadPartition). Every write changes
// the row's seq, so it rewrites its index entry either way.
const countersIndexColumns = "(slot, seq, key, value)"

// Open opens the database named by spec (sqldb.Open). SQLite commits
// with synchronous=NORMAL: in WAL mode a crash of the process loses
// nothing, and a crash of the machine may lose the last commits but never
// corrupts the file.
//
// On PostgreSQL the pool keeps at most pgConns connections: each is a
// server process, and those of a process that exits end together, each
// costing the server a few milliseconds of CPU as it ends (about 3ms on a
// loaded 2-core machine). A pool of 32, which the parallel loads of an
// acquisition fill, would spend about a tenth of a second of the database
// machine's CPU at the moment the fleet takes over the exiting process's
// partitions. The loads of an acquisition wait for a read in turn,
// leaving two connections to the writes (Store.read, reservedConns).
func Open(spec string, ttl time.Duration) (*sql.DB, sqlfence.Dialect, error) {
	db, dialect, err := sqldb.Open(spec, ttl, "synchronous(NORMAL)")
	if err == nil && dialect == sqlfence.Postgres {
		db.SetMaxOpenConns(pgConns)
		db.SetMaxIdleConns(pgConns)
	}
	return db, dialect, err
}

// pgConns bounds the PostgreSQL connections of a process: the committer's
// transaction, a fence raise, and the loads and preparations of
// partitions (all but two: reservedConns).
const pgConns = 8

// WarmPool opens the connections of db's PostgreSQL pool (pgConns) and
// leaves them idle in it, so that a process takes over partitions with
// its connections open: otherwise the first moves to a process that just
// started open theirs, and a fence raise on the critical path of a move
// waits for the server to start a process for it (5 to 35ms on a loaded
// 2-core machine). SQLite's connections open in microseconds: it does
// nothing there.
func WarmPool(ctx context.Context, db *sql.DB, dialect sqlfence.Dialect) error {
	if dialect != sqlfence.Postgres {
		return nil
	}
	conns := make([]*sql.Conn, 0, pgConns)
	defer func() {
		for _, c := range conns {
			_ = c.Close() // back to the pool, idle
		}
	}()
	for range pgConns {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("open the connection pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// CreateSchema creates the fences table and the counter's tables if they do
// not exist. Several processes starting together may run it at once.
func CreateSchema(ctx context.Context, db *sql.DB, dialect sqlfence.Dialect, fences *sqlfence.Fences) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if dialect == sqlfence.Postgres {
		// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's
		// catalog; one lock serializes the processes starting together.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7306106)"); err != nil {
			return fmt.Errorf("create schema: lock: %w", err)
		}
	}
	if err := fences.CreateTable(ctx, tx); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS " + CountersTable + ` (
	key       TEXT    NOT NULL PRIMARY KEY,
	partition INTEGER NOT NULL, -- the key's partition when last written (informational: a resize changes it)
	slot      BIGINT  NOT NULL DEFAULT 0, -- SlotOf(key): the partitions of any power-of-two count are ranges of slots
	value     BIGINT  NOT NULL,
	epoch     BIGINT  NOT NULL, -- fencing token of the last write
	seq       BIGINT  NOT NULL  -- above every earlier write's of the partition: what a prepared owner catches up from
)`,
		"CREATE TABLE IF NOT EXISTS " + IncrementsTable + ` (
	idem       TEXT   NOT NULL PRIMARY KEY, -- the Idempotency-Key header
	key        TEXT   NOT NULL,
	value      BIGINT NOT NULL, -- the counter's value after this increment
	epoch      BIGINT NOT NULL,
	node       TEXT   NOT NULL,
	applied_at BIGINT NOT NULL  -- Unix milliseconds, for pruning
)`,
	} {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	// The index is created only if it is missing: PostgreSQL's CREATE
	// INDEX IF NOT EXISTS takes a SHARE lock on the table before it finds
	// the index there, so it waits for the commits in flight, and every
	// write to the table queued after it (every partition's, every
	// owner's) waits until this transaction ends: a process starting
	// while the fleet serves would stall the fleet's commits.
	var indexes int
	q := "SELECT count(*) FROM pg_catalog.pg_indexes WHERE schemaname = current_schema() AND indexname = $1"
	if dialect == sqlfence.SQLite {
		q = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
	}
	if err := tx.QueryRowContext(ctx, q, countersIndex).Scan(&indexes); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if indexes == 0 {
		if _, err := tx.ExecContext(ctx, "CREATE INDEX "+countersIndex+" ON "+CountersTable+" "+countersIndexColumns); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: commit: %w", err)
	}
	return nil
}

// ReadCounters returns every counter in db: key -> value.
func ReadCounters(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	out := make(map[string]int64)
	rows, err := db.QueryContext(ctx, "SELECT key, value FROM "+CountersTable)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// AppliedRow is one applied increment as the increments table records it.
type AppliedRow struct {
	Key   string
	Value int64 // the counter's value after it
	Node  string
	Epoch int64
}

// ReadApplied returns every applied increment in db: idempotency key ->
// row.
func ReadApplied(ctx context.Context, db *sql.DB) (map[string]AppliedRow, error) {
	out := make(map[string]AppliedRow)
	rows, err := db.QueryContext(ctx, "SELECT idem, key, value, node, epoch FROM "+IncrementsTable)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r AppliedRow
		if err := rows.Scan(&id, &r.Key, &r.Value, &r.Node, &r.Epoch); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}
