package sqlfence_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestExecGuarded: the one-statement fenced write inserts, updates and
// deletes under an admitted token, in a transaction or on its own; refuses
// a stale token without writing; tells a write that matched nothing from
// a stale one; and merges into the statement's own WITH list.
func TestExecGuarded(t *testing.T) {
	for _, e := range engines(t, "guard") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			freshTable(t, db, "guard_kv", "CREATE TABLE guard_kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
			ins := "INSERT INTO guard_kv (k, v) SELECT " + e.ph(1) + ", " + e.ph(2) + " FROM tenure_fence"
			upd := "UPDATE guard_kv SET v = " + e.ph(1) + " WHERE k = " + e.ph(2) + " AND EXISTS (SELECT 1 FROM tenure_fence)"
			del := "DELETE FROM guard_kv WHERE k = " + e.ph(1) + " AND EXISTS (SELECT 1 FROM TENURE_FENCE)"
			get := func(k string) string {
				var v string
				err := db.QueryRowContext(ctx, "SELECT v FROM guard_kv WHERE k = "+e.ph(1), k).Scan(&v)
				if errors.Is(err, sql.ErrNoRows) {
					return "<none>"
				}
				require.NoError(t, err)
				return v
			}
			affected := func(res sql.Result, err error) int64 {
				t.Helper()
				require.NoError(t, err)
				n, err := res.RowsAffected()
				require.NoError(t, err)
				return n
			}
			cur := fence.Token{Scope: "p/1", Epoch: 5}
			old := fence.Token{Scope: "p/1", Epoch: 4}

			// The first write of a scope records its floor.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, tx, cur, ins, "a", "1")))
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, tx, cur, ins, "b", "1")))
			require.NoError(t, tx.Commit())
			requireFloors(t, f, db, map[string]int64{"p/1": 5})

			// No transaction: the statement commits on its own.
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, db, cur, upd, "2", "a")))
			require.Equal(t, "2", get("a"))

			// Admitted, but nothing matched: no row and no error.
			require.Zero(t, affected(f.ExecGuarded(ctx, db, cur, upd, "x", "missing")))

			// Stale: refused, nothing written, in a transaction or not.
			tx, err = db.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = f.ExecGuarded(ctx, tx, old, upd, "zombie", "a")
			fencetest.RequireStale(t, err, "p/1", 4, 5)
			require.NoError(t, tx.Rollback())
			_, err = f.ExecGuarded(ctx, db, old, del, "b")
			fencetest.RequireStale(t, err, "p/1", 4, 5)
			_, err = f.ExecGuarded(ctx, db, old, ins, "c", "zombie")
			fencetest.RequireStale(t, err, "p/1", 4, 5)
			require.Equal(t, "2", get("a"))
			require.Equal(t, "1", get("b"))
			require.Equal(t, "<none>", get("c"))

			// A newer owner raises the floor through its write.
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, db, fence.Token{Scope: "p/1", Epoch: 6}, del, "b")))
			require.Equal(t, "<none>", get("b"))
			_, err = f.ExecGuarded(ctx, db, cur, upd, "zombie", "a")
			fencetest.RequireStale(t, err, "p/1", 5, 6)

			// The statement's own WITH list, plain and recursive; more
			// arguments than the cached guards cover.
			now := fence.Token{Scope: "p/1", Epoch: 6}
			with := "WITH w AS (SELECT " + e.ph(1) + " AS val) UPDATE guard_kv SET v = (SELECT val FROM w) WHERE k = " + e.ph(2) + " AND EXISTS (SELECT 1 FROM tenure_fence)"
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, db, now, with, "with", "a")))
			require.Equal(t, "with", get("a"))
			rec := "  with recursive r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) UPDATE guard_kv SET v = (SELECT CAST(count(*) AS TEXT) FROM r) WHERE k = " + e.ph(1) + " AND EXISTS (SELECT 1 FROM tenure_fence)"
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, db, now, rec, "a")))
			require.Equal(t, "3", get("a"))
			args := []any{"many"}
			phs := make([]string, 20)
			for i := range phs {
				phs[i] = e.ph(i + 2)
				args = append(args, "k"+string(rune('a'+i)))
			}
			args[1] = "a"
			manyArgs := "UPDATE guard_kv SET v = " + e.ph(1) + " WHERE k IN (" + strings.Join(phs, ", ") + ") AND EXISTS (SELECT 1 FROM tenure_fence)"
			require.Equal(t, int64(1), affected(f.ExecGuarded(ctx, db, now, manyArgs, args...)))
			require.Equal(t, "many", get("a"))

			// The statement's own failure is no stale token.
			_, err = f.ExecGuarded(ctx, db, now, ins, "a", "duplicate")
			require.Error(t, err)
			require.NotErrorIs(t, err, fence.ErrStale)

			// Statements that nothing would guard are refused unrun.
			for _, q := range []string{"", "  ", "UPDATE guard_kv SET v = 'unguarded'"} {
				_, err = f.ExecGuarded(ctx, db, now, q)
				require.ErrorIs(t, err, sqlfence.ErrInvalidQuery, q)
			}
			require.Equal(t, "many", get("a"))
			_, err = f.ExecGuarded(ctx, db, fence.Token{Scope: "p/1"}, upd, "x", "a")
			require.ErrorIs(t, err, fence.ErrInvalidToken)
		})
	}
}

// TestExecGuardedWaitsForWriteInFlight: on PostgreSQL, a guarded write of
// a newer owner waits for the transaction of the old owner that holds the
// scope's row, and then commits after it with the floor raised.
func TestExecGuardedWaitsForWriteInFlight(t *testing.T) {
	db := postgres(t)
	ctx := fencetest.Context(t)
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "gwait_fences"})
	require.NoError(t, err)
	mustExec(t, db, "DROP TABLE IF EXISTS gwait_fences")
	require.NoError(t, f.CreateTable(ctx, db))
	freshTable(t, db, "gwait_kv", "CREATE TABLE gwait_kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
	mustExec(t, db, "INSERT INTO gwait_kv VALUES ('k', 'initial')")
	upd := "UPDATE gwait_kv SET v = v || $1 WHERE k = 'k' AND EXISTS (SELECT 1 FROM tenure_fence)"
	a := fence.Token{Scope: "p/1", Epoch: 1}
	b := fence.Token{Scope: "p/1", Epoch: 2}

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = f.ExecGuarded(ctx, tx, a, upd, " A")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := f.ExecGuarded(ctx, db, b, upd, " B")
		done <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 5*time.Millisecond, "the newer owner's guarded write never waited on the old owner's row lock")
	require.NoError(t, tx.Commit())
	require.NoError(t, <-done)
	var v string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT v FROM gwait_kv WHERE k = 'k'").Scan(&v))
	require.Equal(t, "initial A B", v)
	_, err = f.ExecGuarded(ctx, db, a, upd, " zombie")
	fencetest.RequireStale(t, err, "p/1", 1, 2)
}
