package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence/sqlfence"
)

// The counter's tables. counters holds one row per key with its value and
// the partition it hashes to (so that a new owner loads a partition with one
// indexed query); increments holds one row per applied increment, keyed by
// its idempotency key, with the value it produced: a retried increment finds
// its row and gets the same answer instead of a second increment.
const (
	countersTable   = "counters"
	incrementsTable = "counter_increments"
)

// openDB opens the database named by spec: "sqlite:PATH" (modernc.org/sqlite)
// or PostgreSQL (pgx through database/sql): a URL "postgres://..." or a
// key=value DSN "host=... dbname=...".
//
// SQLite is opened in WAL mode with a busy timeout and immediate
// transactions, as sqlfence asks, so that the processes sharing the file
// queue for the write lock instead of failing with SQLITE_BUSY.
//
// On PostgreSQL, idle_in_transaction_session_timeout defaults to ttl: a
// process paused inside a transaction (SIGSTOP, a VM migration) holds the
// fences rows that its successor's fencer must update, and the server ends
// such a session once it has been idle for as long as a lease lasts. Set it
// in the URL to choose otherwise.
func openDB(spec string, ttl time.Duration) (*sql.DB, sqlfence.Dialect, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" || strings.ContainsAny(path, "?#") {
			return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH, a path without '?' or '#'", spec)
		}
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, 0, fmt.Errorf("open %s: %w", spec, err)
		}
		pool(db)
		return db, sqlfence.SQLite, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"), strings.Contains(spec, "="):
		cfg, err := pgx.ParseConfig(spec)
		if err != nil {
			return nil, 0, fmt.Errorf("--db: %w", err)
		}
		if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
			cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(ttl.Milliseconds())
		}
		db := stdlib.OpenDB(*cfg)
		pool(db)
		return db, sqlfence.Postgres, nil
	}
	return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH, postgres://... or a PostgreSQL key=value DSN", redact(spec))
}

// maxConns bounds the connections of a process: with group commit one
// transaction is in flight at a time, without it one per partition, and
// requests load partitions concurrently.
const maxConns = 32

// pool keeps up to maxConns connections open and idle: database/sql keeps
// only 2 idle ones by default, so concurrent transactions would open (on
// PostgreSQL: fork a backend for) a new connection nearly every time.
func pool(db *sql.DB) {
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
}

// redact hides a password in a database URL for messages.
func redact(spec string) string {
	u, err := url.Parse(spec)
	if err != nil || u.User == nil {
		return spec
	}
	return u.Redacted()
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
	partition INTEGER NOT NULL, -- xxhash64(key) mod P, P of the fleet's spec
	value     BIGINT  NOT NULL,
	epoch     BIGINT  NOT NULL  -- fencing token of the last write
)`,
		"CREATE INDEX IF NOT EXISTS counters_by_partition ON " + countersTable + " (partition)",
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
