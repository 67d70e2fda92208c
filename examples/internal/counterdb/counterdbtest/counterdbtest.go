// Package counterdbtest gives the tests of the counter examples their
// databases (SQLite in a temporary directory, or a database of their own on
// the PostgreSQL server of TENURE_PG_DSN) and reads the counters' tables.
package counterdbtest

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
)

// EnvPG names a PostgreSQL server (a URL) on which the tests create a
// database of their own; unset, they use SQLite.
const EnvPG = "TENURE_PG_DSN"

// Dialects returns the databases the process tests run on: SQLite, and
// PostgreSQL when TENURE_PG_DSN is set.
func Dialects() []sqlfence.Dialect {
	if os.Getenv(EnvPG) == "" {
		return []sqlfence.Dialect{sqlfence.SQLite}
	}
	return []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres}
}

// NeedPG skips t unless TENURE_PG_DSN names a PostgreSQL server, and fails
// it instead if TENURE_REQUIRE_PG is set.
func NeedPG(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvPG) != "" {
		return
	}
	if v := os.Getenv("TENURE_REQUIRE_PG"); v != "" && v != "0" {
		t.Fatal("TENURE_REQUIRE_PG is set but TENURE_PG_DSN names no PostgreSQL server")
	}
	t.Skip("no PostgreSQL: set TENURE_PG_DSN to a postgres:// URL of a server the test may create databases on")
}

// DB returns the --db of a fresh database of dialect d, and the database
// opened for the test's own checks: SQLite in a temporary directory, or a
// new database on the PostgreSQL server of TENURE_PG_DSN.
func DB(t *testing.T, d sqlfence.Dialect) (spec string, db *sql.DB, dialect sqlfence.Dialect) {
	t.Helper()
	if d == sqlfence.SQLite {
		spec = "sqlite:" + filepath.Join(t.TempDir(), "counter.db")
	} else {
		spec = pgtest.ForTest(t).DSN
	}
	db, dialect, err := counterdb.Open(spec, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return spec, db, dialect
}

// Counters returns the counters table: key -> value.
func Counters(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	c, err := counterdb.ReadCounters(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Applied returns the increments table: idempotency key -> row.
func Applied(t *testing.T, db *sql.DB) map[string]counterdb.AppliedRow {
	t.Helper()
	a, err := counterdb.ReadApplied(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Loads sums, over the running counter processes procs (read from their
// /metrics and logs), what their stores loaded and failed:
// "full", "catchup" and "prepare" loads (counter_sql_loads_total),
// "moves_warm" and "moves_cold" (the node's prepared moves),
// "commit_failures" and "load_failures" (the "load failed" log lines).
func Loads(procs []*proctest.Proc) map[string]float64 {
	loads := map[string]float64{}
	for _, p := range procs {
		v, _ := p.Metric("counter_commit_failures_total")
		loads["commit_failures"] += v
		loads["load_failures"] += float64(len(p.Find("load failed", nil)))
		for _, o := range []string{"warm", "cold"} {
			v, _ := p.Metric(fmt.Sprintf(`tenure_partition_prepare_duration_seconds_count{node=%q,outcome=%q}`, p.ID, o))
			loads["moves_"+o] += v
		}
		for _, k := range []string{"full", "catchup", "prepare"} {
			v, _ := p.Metric(fmt.Sprintf(`counter_sql_loads_total{kind=%q}`, k))
			loads[k] += v
		}
	}
	return loads
}
