package sqlfence_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

func TestAdvance(t *testing.T) {
	for _, e := range engines(t, "admit") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			floor, err := f.Floor(ctx, db, "p/1")
			require.NoError(t, err)
			require.Zero(t, floor)

			fencer := sqlfence.Fencer{DB: db, Fences: f}
			require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 10}))
			require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 10}), "equal epoch: same owner")
			require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 12}))
			fencetest.RequireStale(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 11}), "p/1", 11, 12)
			floor, err = f.Floor(ctx, db, "p/1")
			require.NoError(t, err)
			require.Equal(t, int64(12), floor)

			// Within a caller's transaction: a refusal leaves the tx usable
			// for the rollback, and nothing changes.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			fencetest.RequireStale(t, f.Advance(ctx, tx, fence.Token{Scope: "p/1", Epoch: 3}), "p/1", 3, 12)
			require.NoError(t, tx.Rollback())

			// Epochs at the top of int64.
			require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/2", Epoch: 1<<63 - 1}))
			fencetest.RequireStale(t, fencer.Advance(ctx, fence.Token{Scope: "p/2", Epoch: 1<<63 - 2}), "p/2", 1<<63-2, 1<<63-1)
		})
	}
}

func TestExecAndDo(t *testing.T) {
	for _, e := range engines(t, "exec") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			freshTable(t, db, "exec_kv", "CREATE TABLE exec_kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
			ins := "INSERT INTO exec_kv (k, v) VALUES (" + e.ph(1) + ", " + e.ph(2) + ")"
			upd := "UPDATE exec_kv SET v = " + e.ph(1) + " WHERE k = " + e.ph(2)
			cur := fence.Token{Scope: "p/1", Epoch: 5}
			old := fence.Token{Scope: "p/1", Epoch: 4}

			err := f.Do(ctx, db, cur, func(tx *sql.Tx) error {
				res, err := f.Exec(ctx, tx, cur, ins, "a", "1")
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				require.Equal(t, int64(1), n)
				return nil
			})
			require.NoError(t, err)

			// The stale token's statement never runs.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = f.Exec(ctx, tx, old, upd, "zombie", "a")
			fencetest.RequireStale(t, err, "p/1", 4, 5)
			require.NoError(t, tx.Rollback())

			ran := false
			err = f.Do(ctx, db, old, func(tx *sql.Tx) error { ran = true; return nil })
			fencetest.RequireStale(t, err, "p/1", 4, 5)
			require.False(t, ran, "fn must not run under a stale token")

			// fn's error rolls back, the admission included.
			boom := errors.New("boom")
			err = f.Do(ctx, db, fence.Token{Scope: "p/1", Epoch: 9}, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, upd, "rolled back", "a")
				require.NoError(t, err)
				return boom
			})
			require.ErrorIs(t, err, boom)
			floor, err := f.Floor(ctx, db, "p/1")
			require.NoError(t, err)
			require.Equal(t, int64(5), floor)

			var v string
			require.NoError(t, db.QueryRowContext(ctx, "SELECT v FROM exec_kv WHERE k = "+e.ph(1), "a").Scan(&v))
			require.Equal(t, "1", v)
		})
	}
}

func TestBadInput(t *testing.T) {
	e := newSQLite(t, "bad")
	ctx := fencetest.Context(t)
	f := e.fences
	for name, tok := range map[string]fence.Token{
		"empty scope":      {Epoch: 1},
		"zero epoch":       {Scope: "p/1"},
		"negative epoch":   {Scope: "p/1", Epoch: -1},
		"oversize scope":   {Scope: strings.Repeat("s", fence.MaxScopeLen+1), Epoch: 1},
		"control in scope": {Scope: "p/\n1", Epoch: 1},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, f.Advance(ctx, e.db, tok), fence.ErrInvalidToken)
			require.ErrorIs(t, f.Do(ctx, e.db, tok, func(*sql.Tx) error { return nil }), fence.ErrInvalidToken)
			_, err := f.Exec(ctx, e.db, tok, "SELECT 1")
			require.ErrorIs(t, err, fence.ErrInvalidToken)
			require.ErrorIs(t, sqlfence.Fencer{DB: e.db, Fences: f}.Advance(ctx, tok), fence.ErrInvalidToken)
		})
	}
	_, err := f.Floor(ctx, e.db, "")
	require.ErrorIs(t, err, fence.ErrInvalidToken)
	_, err = f.Exec(ctx, e.db, fence.Token{Scope: "p/1", Epoch: 1}, "  ")
	require.ErrorIs(t, err, sqlfence.ErrInvalidQuery)
	require.ErrorIs(t, sqlfence.Fencer{}.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 1}), sqlfence.ErrInvalidConfig)

	for name, c := range map[string]sqlfence.Config{
		"no dialect":    {Table: "t"},
		"bad dialect":   {Dialect: 7},
		"quoted table":  {Dialect: sqlfence.SQLite, Table: `"t"`},
		"injection":     {Dialect: sqlfence.Postgres, Table: "t; DROP TABLE x"},
		"three parts":   {Dialect: sqlfence.Postgres, Table: "a.b.c"},
		"empty part":    {Dialect: sqlfence.Postgres, Table: "a."},
		"leading digit": {Dialect: sqlfence.Postgres, Table: "1t"},
		"overlong":      {Dialect: sqlfence.Postgres, Table: strings.Repeat("t", 64)},
	} {
		_, err := sqlfence.New(c)
		require.ErrorIs(t, err, sqlfence.ErrInvalidConfig, name)
	}
	for _, c := range []sqlfence.Config{
		sqlfence.DefaultConfig(),
		{Dialect: sqlfence.SQLite},
		{Dialect: sqlfence.Postgres, Table: "fencing.tenure_fences"},
	} {
		f, err := sqlfence.New(c)
		require.NoError(t, err)
		require.NotNil(t, f)
	}
	require.Equal(t, "$3", sqlfence.Postgres.Placeholder(3))
	require.Equal(t, "?", sqlfence.SQLite.Placeholder(3))
	require.Equal(t, "postgres", sqlfence.Postgres.String())
	require.Equal(t, "sqlite", sqlfence.SQLite.String())
	require.Equal(t, "Dialect(9)", sqlfence.Dialect(9).String())
}

// TestSchemaQualifiedTable: the table may live in another schema.
func TestSchemaQualifiedTable(t *testing.T) {
	db := postgres(t)
	ctx := fencetest.Context(t)
	mustExec(t, db, "DROP SCHEMA IF EXISTS fencing CASCADE")
	mustExec(t, db, "CREATE SCHEMA fencing")
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "fencing.tenure_fences"})
	require.NoError(t, err)
	require.NoError(t, f.CreateTable(ctx, db))
	fencer := sqlfence.Fencer{DB: db, Fences: f}
	require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 2}))
	fencetest.RequireStale(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 1}), "p/1", 1, 2)
}

// TestCreateTableSparse: on PostgreSQL the fences table keeps room on its
// pages for the new versions of its rows.
func TestCreateTableSparse(t *testing.T) {
	db := postgres(t)
	ctx := fencetest.Context(t)
	mustExec(t, db, "DROP TABLE IF EXISTS sparse_fences")
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "sparse_fences"})
	require.NoError(t, err)
	require.NoError(t, f.CreateTable(ctx, db))
	require.NoError(t, f.CreateTable(ctx, db), "idempotent")
	var opts string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'sparse_fences'").Scan(&opts))
	require.Equal(t, "fillfactor=10", opts)
}
