package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
)

// envPG names a PostgreSQL server (a URL) on which the tests create a
// database of their own; unset, they use SQLite.
const envPG = "TENURE_PG_DSN"

// testDB returns the --db of a fresh database, and the database opened for
// the test's own checks: SQLite in a temporary directory, or a new database
// on the PostgreSQL server of TENURE_PG_DSN.
func testDB(t *testing.T) (spec string, db *sql.DB, dialect sqlfence.Dialect) {
	t.Helper()
	dsn := os.Getenv(envPG)
	if dsn == "" {
		spec = "sqlite:" + filepath.Join(t.TempDir(), "scheduler.db")
		db, dialect, err := openDB(spec, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return spec, db, dialect
	}
	spec = pgtest.ForTest(t).DSN
	db, dialect, err := openDB(spec, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return spec, db, dialect
}

// closedRow is one row of period_closes.
type closedRow struct {
	tenant     string
	start, end int64
	closedBy   string
	epoch      int64
}

// closedRows returns the job's rows, by tenant and period.
func closedRows(t *testing.T, db *sql.DB, dialect sqlfence.Dialect, job string) []closedRow {
	t.Helper()
	q := "SELECT tenant, period_start, period_end, closed_by, epoch FROM " + closesTable +
		" WHERE job = " + dialect.Placeholder(1) + " ORDER BY tenant, period_start"
	rows, err := db.Query(q, job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []closedRow
	for rows.Next() {
		var r closedRow
		if err := rows.Scan(&r.tenant, &r.start, &r.end, &r.closedBy, &r.epoch); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
