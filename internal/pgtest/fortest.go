package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ForTest returns a fresh database for tb, on the server of TENURE_PG_DSN
// or on a private server started for tb, and closes it (dropping the
// database and stopping a private server) when tb ends. If PostgreSQL is
// unavailable it skips tb, or fails it when Required.
func ForTest(tb testing.TB) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := Open(ctx)
	Check(tb, err)
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	tb.Logf("PostgreSQL from %s", d.Source)
	return d
}

// Check ends tb on an error from Open: it skips tb when PostgreSQL is
// unavailable and not Required, and fails it otherwise. A nil err does
// nothing.
func Check(tb testing.TB, err error) {
	tb.Helper()
	switch {
	case err == nil:
	case errors.Is(err, ErrUnavailable) && !Required():
		tb.Skipf("PostgreSQL tests skipped: %v (set %s, or install PostgreSQL; %s=1 makes this a failure)", err, EnvDSN, EnvRequire)
	default:
		tb.Fatalf("PostgreSQL: %v", err)
	}
}
