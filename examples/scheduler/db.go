package main

import (
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

// openDB opens the database named by spec: "sqlite:PATH" (modernc.org/sqlite)
// or a PostgreSQL URL "postgres://..." (pgx through database/sql).
//
// SQLite is opened in WAL mode with a busy timeout and immediate
// transactions, as sqlfence asks, so that the processes sharing the file
// queue for the write lock instead of failing with SQLITE_BUSY.
//
// On PostgreSQL, idle_in_transaction_session_timeout defaults to ttl: a
// process paused inside a transaction (SIGSTOP, a VM migration) holds the
// fences row that its successor's fencer must update, and the server ends
// such a session once it has been idle for as long as a lease lasts. Set it
// in the URL to choose otherwise.
func openDB(spec string, ttl time.Duration) (*sql.DB, sqlfence.Dialect, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" || strings.ContainsAny(path, "?#") {
			return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH, a path without '?' or '#'", spec)
		}
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, 0, fmt.Errorf("open %s: %w", spec, err)
		}
		return db, sqlfence.SQLite, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		cfg, err := pgx.ParseConfig(spec)
		if err != nil {
			return nil, 0, fmt.Errorf("--db: %w", err)
		}
		if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
			cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(ttl.Milliseconds())
		}
		return stdlib.OpenDB(*cfg), sqlfence.Postgres, nil
	}
	return nil, 0, fmt.Errorf("--db %q: want sqlite:PATH or postgres://...", redact(spec))
}

// redact hides a password in a database URL for messages.
func redact(spec string) string {
	u, err := url.Parse(spec)
	if err != nil || u.User == nil {
		return spec
	}
	return u.Redacted()
}
