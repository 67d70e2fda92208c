package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/fence"
)

// Fencer raises floors in a database, each call in a transaction of its
// own: it is what an owner registers so that its new epoch is recorded
// before its first write. It is a fence.Fencer, and its AdvanceAll raises
// many floors in one transaction. A Fencer is safe for concurrent use.
type Fencer struct {
	// DB is the database. It must not be nil.
	DB *sql.DB
	// Fences names the table and dialect. It must not be nil.
	Fences *Fences
}

var _ fence.Fencer = Fencer{}

func (f Fencer) check() error {
	switch {
	case f.DB == nil:
		return &nilError{what: "Fencer.DB", field: true}
	case f.Fences == nil:
		return &nilError{what: "Fencer.Fences", field: true}
	}
	return nil
}

// Advance raises t's scope to t.Epoch in its own transaction: one
// statement, committed on its own, which waits for the transactions in
// flight that hold the scope's row. It returns a *fence.StaleError if the
// scope is already newer.
func (f Fencer) Advance(ctx context.Context, t fence.Token) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Fences.Advance(ctx, f.DB, t)
}

// AdvanceAll raises the floor of every token's scope to its epoch in one
// transaction of its own, with a few multi-row statements (as many rows in
// each as the engine's parameter limit allows) instead of a transaction per
// token: a node that acquires a thousand partitions at once fences them
// all with one commit. Tokens that fit one statement (up to 499 on
// SQLite, 8192 on PostgreSQL) are raised by that statement alone, which
// is its own transaction: one round trip to the database. The result is as if each token had been given to
// Advance, the highest epoch of each scope first. AdvanceAll is idempotent
// and safe for concurrent use: calls lock the scopes' rows in one order
// (by scope), so that two of them never deadlock on each other. ts is not
// modified; an empty ts does nothing.
//
// If some tokens are stale (their scopes' floors are above their epochs),
// the others are still advanced and committed (floors only rise, so
// applying them is safe), and AdvanceAll returns a *StaleTokensError that
// names every stale token with its scope's current epoch;
// errors.Is(err, fence.ErrStale) holds and errors.As finds each
// *fence.StaleError. Any other error means that the transaction was rolled
// back and no floor moved (or, for a failed commit, that the outcome is
// unknown); calling AdvanceAll again with the same tokens is safe. An
// invalid token fails the whole call with an error wrapping
// fence.ErrInvalidToken before any statement runs.
//
// The ownership package looks for this method with the interface
// assertion
//
//	interface{ AdvanceAll(context.Context, []fence.Token) error }
//
// on a registered fence.Fencer, and calls it once with the tokens of all
// the partitions it acquired together, instead of Advance per partition,
// before any work runs under them.
func (f Fencer) AdvanceAll(ctx context.Context, ts []fence.Token) (err error) {
	if err := f.check(); err != nil {
		return err
	}
	if err := f.Fences.check(ctx, f.DB); err != nil {
		return err
	}
	if err := validateAll(ts); err != nil || len(ts) == 0 {
		return err
	}
	if len(ts) <= f.Fences.batch.rows {
		// One statement: atomic on its own, and a round trip to the
		// database instead of three (begin, statement, commit).
		return f.Fences.advanceAll(ctx, f.DB, ts)
	}
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	aerr := f.Fences.advanceAll(ctx, tx, ts)
	var stale *StaleTokensError
	if aerr != nil && !errors.As(aerr, &stale) {
		_ = tx.Rollback()
		return aerr
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return aerr
}
