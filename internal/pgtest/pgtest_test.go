package pgtest_test

import (
	"database/sql"
	"testing"

	"github.com/tenure-go/tenure/internal/pgtest"
)

// TestForTest opens a database and reaches it both through its pool and
// through its DSN, as a program under test would (driver pgx, which the
// package registers).
func TestForTest(t *testing.T) {
	d := pgtest.ForTest(t)
	_, err := d.DB.Exec("CREATE TABLE t (n INTEGER)")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatalf("through %s: %v", d.DSN, err)
	}
}
