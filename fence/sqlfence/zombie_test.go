package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestZombie: owner A (epoch e1) is paused; owner B (e2 > e1) raises the
// floor and writes; A resumes and writes to a row B never touched and to
// B's row, through Do, Exec and ExecGuarded: all refused, and B's data is
// intact.
func TestZombie(t *testing.T) {
	for _, e := range engines(t, "zombie") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			freshTable(t, db, "zombie_kv", "CREATE TABLE zombie_kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
			upsert := "INSERT INTO zombie_kv (k, v) VALUES (" + e.ph(1) + ", " + e.ph(2) + ") ON CONFLICT (k) DO UPDATE SET v = excluded.v"
			put := func(t fence.Token, k, v string) error {
				return f.Do(ctx, db, t, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, upsert, k, v)
					return err
				})
			}
			fencer := sqlfence.Fencer{DB: db, Fences: f}
			scope := fence.PartitionScope(3)
			a := fence.Token{Scope: scope, Epoch: 100}
			b := fence.Token{Scope: scope, Epoch: 250}

			require.NoError(t, fencer.Advance(ctx, a))
			require.NoError(t, put(a, "a-key", "written by A"))

			paused, resume := make(chan struct{}), make(chan struct{})
			type outcome struct {
				name string
				err  error
			}
			results := make(chan []outcome, 1)
			go func() { // owner A, paused past the end of its tenure
				close(paused)
				<-resume
				var out []outcome
				out = append(out, outcome{"insert of a row B never touched", put(a, "fresh-key", "zombie")})
				out = append(out, outcome{"update of B's row", put(a, "b-key", "zombie")})
				var err error
				if tx, berr := db.BeginTx(ctx, nil); berr == nil {
					_, err = f.Exec(ctx, tx, a, "DELETE FROM zombie_kv WHERE k = "+e.ph(1), "b-key")
					_ = tx.Rollback()
				} else {
					err = berr
				}
				out = append(out, outcome{"delete of B's row through Exec", err})
				guardedUpd := "UPDATE zombie_kv SET v = " + e.ph(1) + " WHERE k = " + e.ph(2) + " AND EXISTS (SELECT 1 FROM tenure_fence)"
				if tx, berr := db.BeginTx(ctx, nil); berr == nil {
					_, err = f.ExecGuarded(ctx, tx, a, guardedUpd, "zombie", "b-key")
					_ = tx.Rollback()
				} else {
					err = berr
				}
				out = append(out, outcome{"update of B's row through ExecGuarded", err})
				guardedUpsert := "INSERT INTO zombie_kv (k, v) SELECT " + e.ph(1) + ", " + e.ph(2) + " FROM tenure_fence WHERE true ON CONFLICT (k) DO UPDATE SET v = excluded.v"
				_, err = f.ExecGuarded(ctx, db, a, guardedUpsert, "guarded-key", "zombie")
				out = append(out, outcome{"upsert through ExecGuarded without a transaction", err})
				out = append(out, outcome{"advance", fencer.Advance(ctx, a)})
				results <- out
			}()
			<-paused

			require.NoError(t, fencer.Advance(ctx, b))
			require.NoError(t, put(b, "b-key", "written by B"))

			close(resume)
			for _, o := range <-results {
				t.Run(o.name, func(t *testing.T) { fencetest.RequireStale(t, o.err, scope, a.Epoch, b.Epoch) })
			}
			rows := map[string]string{}
			rs, err := db.QueryContext(ctx, "SELECT k, v FROM zombie_kv")
			require.NoError(t, err)
			for rs.Next() {
				var k, v string
				require.NoError(t, rs.Scan(&k, &v))
				rows[k] = v
			}
			require.NoError(t, rs.Err())
			require.NoError(t, rs.Close())
			require.Equal(t, map[string]string{"a-key": "written by A", "b-key": "written by B"}, rows)
		})
	}
}

// TestAdvanceWaitsForWriteInFlight: a new owner's Advance waits for the
// transaction of the old owner that was admitted before it, so the old
// owner's write commits before the floor moves, never after. On PostgreSQL
// the test waits until the Advance is seen blocked on a lock.
func TestAdvanceWaitsForWriteInFlight(t *testing.T) {
	for _, e := range engines(t, "inflight") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			freshTable(t, db, "inflight_kv", "CREATE TABLE inflight_kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
			a := fence.Token{Scope: "p/1", Epoch: 1}
			b := fence.Token{Scope: "p/1", Epoch: 2}
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = f.Exec(ctx, tx, a, "INSERT INTO inflight_kv (k, v) VALUES ('k', 'A')")
			require.NoError(t, err)

			advanced := make(chan error, 1)
			go func() { advanced <- sqlfence.Fencer{DB: db, Fences: f}.Advance(ctx, b) }()
			if e.name == "postgres" {
				require.Eventually(t, func() bool {
					var n int
					err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&n)
					return err == nil && n > 0
				}, 30*time.Second, 5*time.Millisecond, "the new owner's Advance never waited on the old owner's row lock")
			}
			select {
			case err := <-advanced:
				t.Fatalf("Advance finished while an admitted transaction was open: %v", err)
			default:
			}
			require.NoError(t, tx.Commit())
			require.NoError(t, <-advanced)

			floor, err := f.Floor(ctx, db, "p/1")
			require.NoError(t, err)
			require.Equal(t, int64(2), floor)
			err = f.Do(ctx, db, a, func(*sql.Tx) error { return errors.New("must not run") })
			fencetest.RequireStale(t, err, "p/1", 1, 2)
			var n int
			require.NoError(t, db.QueryRowContext(context.Background(), "SELECT count(*) FROM inflight_kv").Scan(&n))
			require.Equal(t, 1, n)
		})
	}
}
