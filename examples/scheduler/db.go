package main

import (
	"database/sql"
	"time"

	"github.com/tenure-go/tenure/examples/internal/sqldb"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// openDB opens the database named by spec (sqldb.Open), with SQLite's
// default durability: every commit is synced.
func openDB(spec string, ttl time.Duration) (*sql.DB, sqlfence.Dialect, error) {
	return sqldb.Open(spec, ttl)
}
