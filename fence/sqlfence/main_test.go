package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/internal/testsupport"
)

var (
	pgOnce sync.Once
	pg     *pgtest.DB
	pgErr  error
)

// TestMain runs the tests, then stops the PostgreSQL server they used (if
// any) and checks for leaked goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	if pg != nil {
		if err := pg.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "sqlfence: closing PostgreSQL:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := testsupport.WaitNoLeaks(testsupport.Grace); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests ended: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// postgres returns the package's PostgreSQL database, started on first use.
// It skips the test if PostgreSQL is unavailable, unless TENURE_REQUIRE_PG
// demands it.
func postgres(tb testing.TB) *sql.DB {
	tb.Helper()
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pg, pgErr = pgtest.Open(ctx)
		if pgErr == nil {
			tb.Logf("sqlfence: PostgreSQL from %s", pg.Source)
		}
	})
	pgtest.Check(tb, pgErr)
	return pg.DB
}

// engine is a database to run a test against.
type engine struct {
	name    string
	db      *sql.DB
	fences  *sqlfence.Fences
	dialect sqlfence.Dialect
}

// ph returns the dialect's placeholder for argument n.
func (e engine) ph(n int) string { return e.dialect.Placeholder(n) }

// engines returns the engines to run a test against: SQLite always,
// PostgreSQL when available. Each gets its own fences table, named after
// table, and the caller's own tables must be named after it too.
func engines(t *testing.T, table string) []engine {
	t.Helper()
	out := []engine{newSQLite(t, table)}
	t.Run("postgres-setup", func(t *testing.T) { postgres(t) })
	if pg != nil {
		f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: table + "_fences"})
		require.NoError(t, err)
		mustExec(t, pg.DB, "DROP TABLE IF EXISTS "+table+"_fences")
		require.NoError(t, f.CreateTable(context.Background(), pg.DB))
		out = append(out, engine{name: "postgres", db: pg.DB, fences: f, dialect: sqlfence.Postgres})
	}
	return out
}

// newSQLite opens a fresh SQLite database in a file, in WAL mode, with
// immediate transactions (the first statement takes the write lock) and a
// generous busy timeout so that concurrent writers queue.
func newSQLite(tb testing.TB, table string) engine {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Table: table + "_fences"})
	require.NoError(tb, err)
	require.NoError(tb, f.CreateTable(context.Background(), db))
	return engine{name: "sqlite", db: db, fences: f, dialect: sqlfence.SQLite}
}

// freshTable drops table if it exists (the PostgreSQL database outlives one
// run of a test under -count) and creates it with ddl.
func freshTable(t testing.TB, db *sql.DB, table, ddl string) {
	t.Helper()
	mustExec(t, db, "DROP TABLE IF EXISTS "+table)
	mustExec(t, db, ddl)
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), q, args...)
	require.NoError(t, err, q)
}
