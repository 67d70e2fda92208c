package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Queryer is what Fences needs of a transaction: *sql.Tx satisfies it, and
// so do *sql.DB and *sql.Conn (outside a transaction, advancing guards
// nothing but the advance itself).
type Queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Fences checks and records tokens against a fences table. It holds only
// its configuration and statements: it is safe for concurrent use.
type Fences struct {
	cfg     Config
	metrics *metrics.Fence
	create  string
	advance string
	floor   string
	batch   batchStatements
	guard   guardStatements
}

// New returns Fences for cfg, which is validated and copied. With
// cfg.Metrics set, it registers the fence metrics there, or counts into
// those registered there already; an error registering them wraps
// ErrMetrics.
func New(cfg Config) (*Fences, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newFenceMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = defaultTable
	}
	d, t := cfg.Dialect, cfg.Table
	return &Fences{
		cfg:     cfg,
		metrics: m,
		create:  "CREATE TABLE IF NOT EXISTS " + t + " (scope TEXT PRIMARY KEY, epoch BIGINT NOT NULL)" + d.tableOptions(),
		advance: upsertPrefix(t) + "(" + d.Placeholder(1) + ", " + d.Placeholder(2) + ")" + upsertSuffix,
		floor:   "SELECT epoch FROM " + t + " WHERE scope = " + d.Placeholder(1),
		batch:   newBatchStatements(d, t),
		guard:   newGuardStatements(d, t),
	}, nil
}

// upsertPrefix and upsertSuffix enclose the VALUES rows of the statement
// that raises floors: a row is inserted, or raises the scope's row iff its
// epoch is at least the recorded one.
func upsertPrefix(table string) string {
	return "INSERT INTO " + table + " AS f (scope, epoch) VALUES "
}

const upsertSuffix = " ON CONFLICT (scope) DO UPDATE SET epoch = excluded.epoch WHERE f.epoch <= excluded.epoch"

// check refuses a nil *Fences, a nil ctx and a nil (or typed nil) Queryer.
func (f *Fences) check(ctx context.Context, q Queryer) error {
	switch {
	case f == nil:
		return &nilError{what: "*Fences"}
	case nilness.Is(ctx):
		return &nilError{what: "context"}
	case nilness.Is(q):
		return &nilError{what: fmt.Sprintf("Queryer (%T)", q)}
	}
	return nil
}

// CreateTable creates the fences table if it does not exist.
func (f *Fences) CreateTable(ctx context.Context, db Queryer) error {
	if err := f.check(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, f.create); err != nil {
		return fmt.Errorf("sqlfence: create table %s: %w", f.cfg.Table, err)
	}
	return nil
}

// Advance checks t against its scope's floor inside the transaction tx and
// records it: it raises the floor to t.Epoch if t.Epoch is at least the
// recorded one (equal epochs are the same owner continuing), and holds the
// scope's row until tx ends. A new owner calls it before its first write;
// Exec and Do call it before theirs. It returns a *fence.StaleError
// (errors.Is fence.ErrStale) if t is older; then tx must not commit the
// writes t fences (roll it back). An invalid t gives an error wrapping
// fence.ErrInvalidToken.
func (f *Fences) Advance(ctx context.Context, tx Queryer, t fence.Token) error {
	if err := f.check(ctx, tx); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	return f.advanceValid(ctx, tx, t)
}

// advanceValid is Advance for arguments already checked.
func (f *Fences) advanceValid(ctx context.Context, tx Queryer, t fence.Token) error {
	res, err := tx.ExecContext(ctx, f.advance, t.Scope, t.Epoch)
	if err != nil {
		return fmt.Errorf("sqlfence: advance %s: %w", t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: advance %s: rows affected: %w", t, err)
	}
	if n > 0 {
		f.metrics.Admitted(1)
		return nil
	}
	cur, err := f.floorOf(ctx, tx, t.Scope)
	if err != nil {
		return fmt.Errorf("sqlfence: advance %s refused; reading the current epoch: %w", t, err)
	}
	f.metrics.Rejected(t.Scope)
	return &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur}
}

// Floor returns the epoch recorded for scope, or 0 if none.
func (f *Fences) Floor(ctx context.Context, q Queryer, scope string) (int64, error) {
	if err := f.check(ctx, q); err != nil {
		return 0, err
	}
	if err := fence.ValidateScope(scope); err != nil {
		return 0, err
	}
	e, err := f.floorOf(ctx, q, scope)
	if err != nil {
		return 0, fmt.Errorf("sqlfence: floor of %q: %w", scope, err)
	}
	return e, nil
}

// floorOf reads scope's floor (0 if none). Its error is the driver's,
// for the caller to wrap once.
func (f *Fences) floorOf(ctx context.Context, q Queryer, scope string) (int64, error) {
	var e int64
	if err := q.QueryRowContext(ctx, f.floor, scope).Scan(&e); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	return e, nil
}

// Exec advances t in tx and then runs the caller's statement (an UPDATE,
// INSERT or DELETE) in the same transaction, so that the statement takes
// effect only if tx commits with t admitted. If t is stale, the statement
// is not run and Exec returns a *fence.StaleError; roll tx back. The
// statement's own error is returned as the driver gave it.
// ExecGuarded does the same in one statement on PostgreSQL.
func (f *Fences) Exec(ctx context.Context, tx Queryer, t fence.Token, query string, args ...any) (sql.Result, error) {
	if err := f.check(ctx, tx); err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" {
		return nil, fmt.Errorf("%w: empty statement", ErrInvalidQuery)
	}
	if err := f.Advance(ctx, tx, t); err != nil {
		return nil, err
	}
	return tx.ExecContext(ctx, query, args...)
}

// Do runs fn in a new transaction of db in which t has been advanced, and
// commits it if fn returns nil. If t is stale, fn does not run and Do
// returns a *fence.StaleError; if fn fails, the transaction is rolled back
// and fn's error returned.
func (f *Fences) Do(ctx context.Context, db *sql.DB, t fence.Token, fn func(tx *sql.Tx) error) (err error) {
	if err := f.check(ctx, db); err != nil {
		return err
	}
	if fn == nil {
		return &nilError{what: "function"}
	}
	if err := t.Validate(); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := f.advanceValid(ctx, tx, t); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}
