package sqlfence_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
)

// TestNilArguments: every function refuses a nil argument, typed nils
// inside an interface included, with an error wrapping ErrNilArgument
// (and ErrInvalidConfig for a Fencer's fields) instead of panicking.
func TestNilArguments(t *testing.T) {
	e := newSQLite(t, "nils")
	ctx := fencetest.Context(t)
	f, db := e.fences, e.db
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	toks := []fence.Token{tok}
	var (
		nilTx     *sql.Tx
		nilDB     *sql.DB
		nilConn   *sql.Conn
		nilFences *sqlfence.Fences
		nilCtx    context.Context
		nilQ      sqlfence.Queryer
		nilFn     func(*sql.Tx) error
	)
	upd := "UPDATE t SET v = 1 WHERE EXISTS (SELECT 1 FROM tenure_fence)"
	for _, c := range []struct {
		name   string
		call   func() error
		config bool // a Fencer's field: ErrInvalidConfig too
	}{
		{name: "CreateTable nil Queryer", call: func() error { return f.CreateTable(ctx, nilQ) }},
		{name: "CreateTable typed nil *sql.DB", call: func() error { return f.CreateTable(ctx, nilDB) }},
		{name: "Advance typed nil *sql.Tx", call: func() error { return f.Advance(ctx, nilTx, tok) }},
		{name: "Advance typed nil *sql.Conn", call: func() error { return f.Advance(ctx, nilConn, tok) }},
		{name: "Advance nil context", call: func() error { return f.Advance(nilCtx, db, tok) }},
		{name: "Advance nil *Fences", call: func() error { return nilFences.Advance(ctx, db, tok) }},
		{name: "AdvanceAll typed nil *sql.Tx", call: func() error { return f.AdvanceAll(ctx, nilTx, toks) }},
		{name: "AdvanceAll nil *Fences", call: func() error { return nilFences.AdvanceAll(ctx, db, toks) }},
		{name: "Floor typed nil *sql.Tx", call: func() error { _, err := f.Floor(ctx, nilTx, "p/1"); return err }},
		{name: "Exec typed nil *sql.Tx", call: func() error { _, err := f.Exec(ctx, nilTx, tok, "SELECT 1"); return err }},
		{name: "ExecGuarded typed nil *sql.Tx", call: func() error { _, err := f.ExecGuarded(ctx, nilTx, tok, upd); return err }},
		{name: "ExecGuarded nil context", call: func() error { _, err := f.ExecGuarded(nilCtx, db, tok, upd); return err }},
		{name: "Do nil *sql.DB", call: func() error { return f.Do(ctx, nilDB, tok, func(*sql.Tx) error { return nil }) }},
		{name: "Do nil function", call: func() error { return f.Do(ctx, db, tok, nilFn) }},
		{name: "Do nil *Fences", call: func() error { return nilFences.Do(ctx, db, tok, func(*sql.Tx) error { return nil }) }},
		{name: "Fencer.Advance nil DB", call: func() error { return sqlfence.Fencer{DB: nilDB, Fences: f}.Advance(ctx, tok) }, config: true},
		{name: "Fencer.Advance nil Fences", call: func() error { return sqlfence.Fencer{DB: db, Fences: nilFences}.Advance(ctx, tok) }, config: true},
		{name: "Fencer.AdvanceAll nil DB", call: func() error { return sqlfence.Fencer{Fences: f}.AdvanceAll(ctx, toks) }, config: true},
		{name: "Fencer.AdvanceAll nil Fences", call: func() error { return sqlfence.Fencer{DB: db}.AdvanceAll(ctx, toks) }, config: true},
		{name: "Fencer.Advance nil context", call: func() error { return sqlfence.Fencer{DB: db, Fences: f}.Advance(nilCtx, tok) }},
		{name: "Fencer.AdvanceAll nil context", call: func() error { return sqlfence.Fencer{DB: db, Fences: f}.AdvanceAll(nilCtx, toks) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.ErrorIs(t, err, sqlfence.ErrNilArgument)
			if c.config {
				require.ErrorIs(t, err, sqlfence.ErrInvalidConfig)
			}
			require.Equal(t, 1, strings.Count(err.Error(), "sqlfence:"), "the package prefix once: %v", err)
		})
	}
	// The test helper too.
	_, err := pgtest.Open(nilCtx)
	require.ErrorIs(t, err, pgtest.ErrNilArgument)
	var nilPG *pgtest.DB
	require.ErrorIs(t, nilPG.Close(), pgtest.ErrNilArgument)
}

// TestErrorPrefixOnce: errors that pass through several layers of the
// package say "sqlfence:" once, and "fence:" at most once.
func TestErrorPrefixOnce(t *testing.T) {
	e := newSQLite(t, "prefix")
	ctx := fencetest.Context(t)
	f, db := e.fences, e.db
	fencer := sqlfence.Fencer{DB: db, Fences: f}
	tok := fence.Token{Scope: "x/1", Epoch: 5}
	require.NoError(t, fencer.Advance(ctx, tok))
	many := append(partitions(20, 1), fence.Token{Scope: "x/1", Epoch: 4})
	require.NoError(t, fencer.AdvanceAll(ctx, partitions(20, 2)))

	closed, err := sql.Open("sqlite", "file::memory:")
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	closedFencer := sqlfence.Fencer{DB: closed, Fences: f}
	_, floorErr := f.Floor(ctx, closed, "x/1")
	_, guardErr := f.ExecGuarded(ctx, db, tok, "UPDATE nowhere SET v = 1 WHERE EXISTS (SELECT 1 FROM tenure_fence)")
	_, execErr := f.Exec(ctx, db, tok, "  ")
	for name, err := range map[string]error{
		"Advance on a closed database":    closedFencer.Advance(ctx, tok),
		"AdvanceAll on a closed database": closedFencer.AdvanceAll(ctx, many),
		"Advance in a closed database":    f.Advance(ctx, closed, tok),
		"AdvanceAll in a closed database": f.AdvanceAll(ctx, closed, many),
		"Floor in a closed database":      floorErr,
		"CreateTable in a closed one":     f.CreateTable(ctx, closed),
		"ExecGuarded's own failure":       guardErr,
		"Exec of an empty statement":      execErr,
		"AdvanceAll stale":                fencer.AdvanceAll(ctx, many),
		"Advance stale":                   fencer.Advance(ctx, fence.Token{Scope: "x/1", Epoch: 1}),
	} {
		require.Error(t, err, name)
		msg := err.Error()
		require.LessOrEqual(t, strings.Count(msg, "sqlfence:"), 1, "%s: %s", name, msg)
		require.LessOrEqual(t, strings.Count(msg, "fence: ")-strings.Count(msg, "sqlfence: "), 1, "%s: %s", name, msg)
		t.Logf("%s: %s", name, msg)
	}
}
