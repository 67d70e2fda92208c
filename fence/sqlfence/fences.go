package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tenure-go/tenure/fence"
)

// DefaultTable is the default name of the fences table.
const DefaultTable = "tenure_fences"

// Config configures Fences.
type Config struct {
	// Dialect is the database's SQL dialect. It must be set.
	Dialect Dialect
	// Table names the fences table, optionally qualified by a schema
	// ("fencing.tenure_fences"). Each part is an unquoted identifier of
	// letters, digits and underscores. Empty means DefaultTable.
	Table string
}

// DefaultConfig returns the configuration for PostgreSQL with the default
// table.
func DefaultConfig() Config { return Config{Dialect: Postgres, Table: DefaultTable} }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate reports whether c can configure Fences. The error wraps
// ErrInvalidConfig.
func (c Config) Validate() error {
	if !c.Dialect.valid() {
		return fmt.Errorf("%w: unknown dialect %v", ErrInvalidConfig, c.Dialect)
	}
	if c.Table == "" {
		return nil
	}
	parts := strings.Split(c.Table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w: table %q has more than schema.table", ErrInvalidConfig, c.Table)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return fmt.Errorf("%w: table %q: %q is not a plain identifier", ErrInvalidConfig, c.Table, p)
		}
	}
	return nil
}

// Queryer is what Fences needs of a transaction: *sql.Tx satisfies it, and
// so do *sql.DB and *sql.Conn (outside a transaction, admitting guards
// nothing but the admission itself).
type Queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Fences admits tokens against a fences table. It holds only its
// configuration and statements: it is safe for concurrent use.
type Fences struct {
	cfg    Config
	create string
	admit  string
	floor  string
}

// New returns Fences for cfg, which is validated and copied.
func New(cfg Config) (*Fences, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	d, t := cfg.Dialect, cfg.Table
	return &Fences{
		cfg:    cfg,
		create: "CREATE TABLE IF NOT EXISTS " + t + " (scope TEXT PRIMARY KEY, epoch BIGINT NOT NULL)",
		admit: "INSERT INTO " + t + " AS f (scope, epoch) VALUES (" + d.Placeholder(1) + ", " + d.Placeholder(2) + ")" +
			" ON CONFLICT (scope) DO UPDATE SET epoch = excluded.epoch WHERE f.epoch <= excluded.epoch",
		floor: "SELECT epoch FROM " + t + " WHERE scope = " + d.Placeholder(1),
	}, nil
}

// Config returns the configuration with defaults applied.
func (f *Fences) Config() Config { return f.cfg }

// CreateTable creates the fences table if it does not exist.
func (f *Fences) CreateTable(ctx context.Context, db Queryer) error {
	if _, err := db.ExecContext(ctx, f.create); err != nil {
		return fmt.Errorf("sqlfence: create table %s: %w", f.cfg.Table, err)
	}
	return nil
}

// AdmitStatement returns the statement that admits a token, for drivers
// outside database/sql: run it in your transaction with the arguments
// (scope, epoch); one row affected admits the token, none means it is
// stale (read the current epoch with FloorStatement).
func (f *Fences) AdmitStatement() string { return f.admit }

// FloorStatement returns the statement that reads a scope's epoch, with
// the argument (scope).
func (f *Fences) FloorStatement() string { return f.floor }

// Admit admits t inside the transaction tx: it records t.Epoch as its
// scope's epoch if t.Epoch is at least the recorded one, and holds the
// scope's row until tx ends. It returns a *fence.StaleError (errors.Is
// fence.ErrStale) if t is older; then tx must not commit the writes t
// fences (roll it back). An invalid t gives an error wrapping
// fence.ErrInvalidToken.
func (f *Fences) Admit(ctx context.Context, tx Queryer, t fence.Token) error {
	if err := t.Validate(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, f.admit, t.Scope, t.Epoch)
	if err != nil {
		return fmt.Errorf("sqlfence: admit %s: %w", t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: admit %s: rows affected: %w", t, err)
	}
	if n > 0 {
		return nil
	}
	cur, err := f.Floor(ctx, tx, t.Scope)
	if err != nil {
		return fmt.Errorf("sqlfence: admit %s refused; reading the current epoch: %w", t, err)
	}
	return fence.NewStaleError(t, cur)
}

// Advance raises the epoch of t's scope to t.Epoch inside tx, as a new
// owner does before its first write. It is Admit under the name of its
// purpose.
func (f *Fences) Advance(ctx context.Context, tx Queryer, t fence.Token) error {
	return f.Admit(ctx, tx, t)
}

// Floor returns the epoch recorded for scope, or 0 if none.
func (f *Fences) Floor(ctx context.Context, q Queryer, scope string) (int64, error) {
	if err := fence.ValidateScope(scope); err != nil {
		return 0, err
	}
	var e int64
	switch err := q.QueryRowContext(ctx, f.floor, scope).Scan(&e); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("sqlfence: floor of %q: %w", scope, err)
	}
	return e, nil
}

// Exec admits t in tx and then runs the caller's statement (an UPDATE,
// INSERT or DELETE) in the same transaction, so that the statement takes
// effect only if tx commits with t admitted. If t is stale, the statement
// is not run and Exec returns a *fence.StaleError; roll tx back.
func (f *Fences) Exec(ctx context.Context, tx Queryer, t fence.Token, query string, args ...any) (sql.Result, error) {
	if strings.TrimSpace(query) == "" {
		return nil, fmt.Errorf("%w: empty statement", ErrInvalidQuery)
	}
	if err := f.Admit(ctx, tx, t); err != nil {
		return nil, err
	}
	return tx.ExecContext(ctx, query, args...)
}

// Do runs fn in a new transaction of db in which t has been admitted, and
// commits it if fn returns nil. If t is stale, fn does not run and Do
// returns a *fence.StaleError; if fn fails, the transaction is rolled back
// and fn's error returned.
func (f *Fences) Do(ctx context.Context, db *sql.DB, t fence.Token, fn func(tx *sql.Tx) error) (err error) {
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
	if err := f.Admit(ctx, tx, t); err != nil {
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
