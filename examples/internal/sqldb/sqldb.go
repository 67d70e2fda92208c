// Package sqldb opens the database that the --db flag of the counter and
// the scheduler names: SQLite or PostgreSQL, set up as fence/sqlfence asks.
// It is a package of its own so that commands without a database do not
// build the SQL drivers.
package sqldb

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/clock"
)

// maxConns bounds the connections of a process.
const maxConns = 32

// Open opens the database named by spec: "sqlite:PATH"
// (modernc.org/sqlite) or PostgreSQL (pgx through database/sql): a URL
// "postgres://..." or a key=value DSN "host=... dbname=...". sqlitePragmas
// are added to SQLite's (such as "synchronous(NORMAL)").
//
// SQLite is opened in WAL mode with immediate transactions, as sqlfence
// asks, and its connections wait for the write lock (up to 10s, then
// ErrBusy) instead of failing with SQLITE_BUSY: in Go, with attempts about
// half a millisecond apart (busy.go).
//
// On PostgreSQL, idle_in_transaction_session_timeout defaults to ttl: a
// process paused inside a transaction (SIGSTOP, a VM migration) holds the
// fences rows that its successor's fencer must update, and the server ends
// such a session once it has been idle for as long as a lease lasts. Set it
// in the URL to choose otherwise.
//
// The pool keeps up to 32 connections open and idle: database/sql keeps
// only 2 idle ones by default, so concurrent transactions would open (on
// PostgreSQL: fork a backend for) a new connection nearly every time.
func Open(spec string, ttl time.Duration, sqlitePragmas ...string) (*sql.DB, sqlfence.Dialect, error) {
	var db *sql.DB
	var dialect sqlfence.Dialect
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" || strings.ContainsAny(path, "?#") {
			return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH, a path without '?' or '#'", spec)
		}
		var err error
		if db, err = openSQLite(path, busyWait{poll: busyPoll, timeout: busyTimeout, clock: clock.Real()}, sqlitePragmas...); err != nil {
			return nil, 0, fmt.Errorf("open %s: %w", spec, err)
		}
		dialect = sqlfence.SQLite
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"), strings.Contains(spec, "="):
		cfg, err := pgx.ParseConfig(spec)
		if err != nil {
			return nil, 0, fmt.Errorf("--db: %w", err)
		}
		if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
			cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(ttl.Milliseconds())
		}
		db, dialect = stdlib.OpenDB(*cfg), sqlfence.Postgres
	default:
		return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH, postgres://... or a PostgreSQL key=value DSN", redact(spec))
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	return db, dialect, nil
}

// openSQLite opens the SQLite database at path in WAL mode, with immediate
// transactions, sqlitePragmas, and no busy handler: its connections wait
// for the write lock as w says.
func openSQLite(path string, w busyWait, sqlitePragmas ...string) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_txlock=immediate"
	for _, p := range sqlitePragmas {
		dsn += "&_pragma=" + p
	}
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(&busyConnector{inner: c, w: w}), nil
}

// redact hides a password in a database URL for messages.
func redact(spec string) string {
	u, err := url.Parse(spec)
	if err != nil || u.User == nil {
		return spec
	}
	return u.Redacted()
}
