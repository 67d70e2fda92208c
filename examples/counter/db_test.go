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

// dialects returns the databases the process tests run on: SQLite, and
// PostgreSQL when TENURE_PG_DSN is set.
func dialects() []sqlfence.Dialect {
	if os.Getenv(envPG) == "" {
		return []sqlfence.Dialect{sqlfence.SQLite}
	}
	return []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres}
}

// testDB returns the --db of a fresh database, and the database opened for
// the test's own checks: SQLite in a temporary directory, or a new database
// on the PostgreSQL server of TENURE_PG_DSN.
func testDB(t *testing.T, d sqlfence.Dialect) (spec string, db *sql.DB, dialect sqlfence.Dialect) {
	t.Helper()
	if d == sqlfence.SQLite {
		spec = "sqlite:" + filepath.Join(t.TempDir(), "counter.db")
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

// dbCounters returns the counters table: key -> value.
func dbCounters(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	out := make(map[string]int64)
	rows, err := db.Query("SELECT key, value FROM " + countersTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// appliedRow is one row of the increments table.
type appliedRow struct {
	key   string
	value int64
	node  string
	epoch int64
}

// dbApplied returns the increments table: idempotency key -> row.
func dbApplied(t *testing.T, db *sql.DB) map[string]appliedRow {
	t.Helper()
	out := make(map[string]appliedRow)
	rows, err := db.Query("SELECT idem, key, value, node, epoch FROM " + incrementsTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r appliedRow
		if err := rows.Scan(&id, &r.key, &r.value, &r.node, &r.epoch); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[id]; dup {
			t.Errorf("idempotency key %s applied twice", id)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCreateSchemaWaitsForNoWrite creates the counter's schema on
// PostgreSQL, and again while a write to the counters table is in flight,
// as a process that starts while the fleet serves does: the second
// creation must not queue for a lock on the table, where every later
// write (of every partition, every owner) would queue behind it until its
// transaction ends.
func TestCreateSchemaWaitsForNoWrite(t *testing.T) {
	_, db, dialect := testDB(t, sqlfence.Postgres)
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := createSchema(ctx, db, dialect, fences); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+countersTable+" (key, partition, value, epoch, seq) VALUES ('k', 0, 1, 1, 1)"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- createSchema(ctx, db, dialect, fences) }()
	defer func() {
		_ = tx.Rollback() // a creation that waits ends with the write
		<-done
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-tick.C:
		}
		var waiting int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks WHERE relation = '"+countersTable+"'::regclass AND NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			t.Fatal("creating the schema again waits for a lock on the counters table while a write is in flight")
		}
	}
}
