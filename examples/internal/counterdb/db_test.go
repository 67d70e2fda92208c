package counterdb_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestCreateSchemaWaitsForNoWrite creates the counter's schema on
// PostgreSQL, and again while a write to the counters table is in flight,
// as a process that starts while the fleet serves does: the second
// creation must not queue for a lock on the table, where every later
// write (of every partition, every owner) would queue behind it until its
// transaction ends.
func TestCreateSchemaWaitsForNoWrite(t *testing.T) {
	_, db, dialect := counterdbtest.DB(t, sqlfence.Postgres)
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := counterdb.CreateSchema(ctx, db, dialect, fences); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+counterdb.CountersTable+" (key, partition, value, epoch, seq) VALUES ('k', 0, 1, 1, 1)"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- counterdb.CreateSchema(ctx, db, dialect, fences) }()
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
		if waitingOnCounters(t, db) > 0 {
			t.Fatal("creating the schema again waits for a lock on the counters table while a write is in flight")
		}
	}
}

// waitingOnCounters returns the number of lock requests on the counters
// table that PostgreSQL has not granted: sessions that wait for it.
func waitingOnCounters(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_locks WHERE relation = '"+counterdb.CountersTable+"'::regclass AND NOT granted").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
