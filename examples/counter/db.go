package main

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
// fleet uses, with one indexed range query); increments holds one row per applied increment, keyed by
// its idempotency key, with the value it produced: a retried increment finds
// its row and gets the same answer instead of a second increment.
const (
	countersTable   = "counters"
	incrementsTable = "counter_increments"
)

// openDB opens the database named by spec (sqldb.Open). SQLite commits
// with synchronous=NORMAL: in WAL mode a crash of the process loses
// nothing, and a crash of the machine may lose the last commits but never
// corrupts the file.
func openDB(spec string, ttl time.Duration) (*sql.DB, sqlfence.Dialect, error) {
	return sqldb.Open(spec, ttl, "synchronous(NORMAL)")
}

// createSchema creates the fences table and the counter's tables if they do
// not exist. Several processes starting together may run it at once.
func createSchema(ctx context.Context, db *sql.DB, dialect sqlfence.Dialect, fences *sqlfence.Fences) error {
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
		"CREATE TABLE IF NOT EXISTS " + countersTable + ` (
	key       TEXT    NOT NULL PRIMARY KEY,
	partition INTEGER NOT NULL, -- the key's partition when last written (informational: a resize changes it)
	slot      BIGINT  NOT NULL DEFAULT 0, -- slotOf(key): the partitions of any power-of-two count are ranges of slots
	value     BIGINT  NOT NULL,
	epoch     BIGINT  NOT NULL, -- fencing token of the last write
	seq       BIGINT  NOT NULL  -- above every earlier write's of the partition: what a prepared owner catches up from
)`,
		"CREATE INDEX IF NOT EXISTS counters_by_slot ON " + countersTable + " (slot, seq)",
		"CREATE TABLE IF NOT EXISTS " + incrementsTable + ` (
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: commit: %w", err)
	}
	return nil
}
