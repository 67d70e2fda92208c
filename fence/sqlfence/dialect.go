package sqlfence

import (
	"fmt"
	"strconv"
)

// Dialect is the SQL dialect of a database.
type Dialect int

// The supported dialects.
const (
	// Postgres is PostgreSQL (9.5 or later): placeholders $1, $2, ...
	Postgres Dialect = iota + 1
	// SQLite is SQLite (3.24 or later, for upserts): placeholders ?.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

func (d Dialect) valid() bool { return d == Postgres || d == SQLite }

// Placeholder returns the placeholder of the n-th argument (from 1) of a
// statement in d.
func (d Dialect) Placeholder(n int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// tableOptions returns the storage options of the fences table in d. On
// PostgreSQL every fenced write rewrites its scope's row, so the table is
// kept sparse (fillfactor 10): each page keeps room for the new versions,
// which stay on the page (HOT updates) and are pruned early, so that
// finding a scope's current row follows a short chain of versions.
func (d Dialect) tableOptions() string {
	if d == Postgres {
		return " WITH (fillfactor = 10)"
	}
	return ""
}
