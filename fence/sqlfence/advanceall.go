package sqlfence

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/tenure-go/tenure/fence"
)

// Rows per multi-row statement of AdvanceAll, two parameters each.
// PostgreSQL takes up to 65535 parameters in a statement; SQLite builds
// before 3.32 take 999 (later ones 32766), so SQLite's chunks fit the
// smallest limit any supported build has.
const (
	postgresBatchRows = 8192
	sqliteBatchRows   = 499
)

// batchStatements builds the multi-row statements of AdvanceAll, and keeps
// those of a full chunk.
type batchStatements struct {
	dialect    Dialect
	table      string
	rows       int    // rows in a full chunk
	fullUpsert string // upsert of a full chunk
	fullFloors string // floors of a full chunk
}

func newBatchStatements(d Dialect, table string) batchStatements {
	b := batchStatements{dialect: d, table: table, rows: sqliteBatchRows}
	if d == Postgres {
		b.rows = postgresBatchRows
	}
	b.fullUpsert = b.build(b.rows, true)
	b.fullFloors = b.build(b.rows, false)
	return b
}

// upsert returns the upsert of a chunk of n rows.
func (b *batchStatements) upsert(n int) string {
	if n == b.rows {
		return b.fullUpsert
	}
	return b.build(n, true)
}

// floors returns the query of the floors of a chunk of n scopes.
func (b *batchStatements) floors(n int) string {
	if n == b.rows {
		return b.fullFloors
	}
	return b.build(n, false)
}

// build writes the upsert of n (scope, epoch) rows, or the query of the
// floors of n scopes.
func (b *batchStatements) build(n int, upsert bool) string {
	var sb strings.Builder
	if upsert {
		sb.WriteString(upsertPrefix(b.table))
	} else {
		sb.WriteString("SELECT scope, epoch FROM " + b.table + " WHERE scope IN (")
	}
	p := 1
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		if upsert {
			sb.WriteString("(" + b.dialect.Placeholder(p) + ", " + b.dialect.Placeholder(p+1) + ")")
			p += 2
		} else {
			sb.WriteString(b.dialect.Placeholder(p))
			p++
		}
	}
	if upsert {
		sb.WriteString(upsertSuffix)
	} else {
		sb.WriteString(")")
	}
	return sb.String()
}

// validateAll validates every token of ts.
func validateAll(ts []fence.Token) error {
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceAll advances every token of ts inside the transaction tx, as
// Advance does one token, with a few multi-row statements: each scope's
// floor rises to the highest epoch ts holds for it, unless the floor is
// already higher. It holds the rows of all the scopes until tx ends, taking
// their locks in the order of their scopes. If some tokens are stale, the
// others are still advanced in tx and AdvanceAll returns a
// *StaleTokensError (errors.Is fence.ErrStale) naming every stale token;
// committing tx then records the others, which is safe because floors only
// rise. Any other error leaves tx to be rolled back. Fencer.AdvanceAll
// runs it in a transaction of its own.
//
// Two AdvanceAll calls never deadlock on each other, whatever the order of
// their tokens. On PostgreSQL, a transaction that holds several scopes'
// rows taken in another order can deadlock with one; PostgreSQL then
// aborts one of the two (SQLSTATE 40P01), which is retried as usual.
func (f *Fences) AdvanceAll(ctx context.Context, tx Queryer, ts []fence.Token) error {
	if err := f.check(ctx, tx); err != nil {
		return err
	}
	if err := validateAll(ts); err != nil {
		return err
	}
	return f.advanceAll(ctx, tx, ts)
}

// advanceAll is AdvanceAll for arguments already checked.
func (f *Fences) advanceAll(ctx context.Context, tx Queryer, ts []fence.Token) error {
	if len(ts) == 0 {
		return nil
	}
	// Highest epoch of each scope first; the lower ones of a scope are
	// shadowed: stale once the highest is applied.
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b fence.Token) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return cmp.Compare(b.Epoch, a.Epoch)
	})
	uniq := make([]fence.Token, 0, len(sorted))
	var shadowed []fence.Token
	for _, t := range sorted {
		switch {
		case len(uniq) == 0 || uniq[len(uniq)-1].Scope != t.Scope:
			uniq = append(uniq, t)
		case uniq[len(uniq)-1].Epoch != t.Epoch:
			shadowed = append(shadowed, t)
		}
		// else: the same token again, advanced with the first
	}
	var stale []*fence.StaleError
	for chunk := range slices.Chunk(uniq, f.batch.rows) {
		s, err := f.advanceChunk(ctx, tx, chunk)
		if err != nil {
			return fmt.Errorf("sqlfence: advance %d tokens: %w", len(ts), err)
		}
		stale = append(stale, s...)
	}
	if len(shadowed) > 0 {
		// A shadowed token's scope ends at its highest token's epoch, or
		// above it if that one was stale too.
		current := make(map[string]int64, len(shadowed))
		for _, t := range uniq {
			current[t.Scope] = t.Epoch
		}
		for _, se := range stale {
			current[se.Scope] = se.Current
		}
		for _, t := range shadowed {
			stale = append(stale, &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: current[t.Scope]})
		}
	}
	m := f.metrics
	m.Admitted(len(ts) - len(stale))
	for _, se := range stale {
		m.Rejected(se.Scope)
	}
	if len(stale) == 0 {
		return nil
	}
	slices.SortFunc(stale, func(a, b *fence.StaleError) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return cmp.Compare(a.Presented, b.Presented)
	})
	return &StaleTokensError{Stale: stale, Advanced: len(ts) - len(stale)}
}

// advanceChunk runs the upsert of one chunk of distinct scopes and returns
// the tokens it refused. The common case, every row raised or confirmed,
// costs one statement; otherwise a second one reads the chunk's floors to
// find the stale tokens.
func (f *Fences) advanceChunk(ctx context.Context, tx Queryer, chunk []fence.Token) ([]*fence.StaleError, error) {
	args := make([]any, 0, 2*len(chunk))
	for _, t := range chunk {
		args = append(args, t.Scope, t.Epoch)
	}
	res, err := tx.ExecContext(ctx, f.batch.upsert(len(chunk)), args...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("rows affected: %w", err)
	}
	if n == int64(len(chunk)) {
		return nil, nil
	}
	got, err := f.readFloors(ctx, tx, f.batch.floors(len(chunk)), chunk, args[:0])
	if err != nil {
		return nil, fmt.Errorf("some refused; reading their floors: %w", err)
	}
	var stale []*fence.StaleError
	for _, t := range chunk {
		if cur := got[t.Scope]; cur > t.Epoch {
			stale = append(stale, &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur})
		}
	}
	return stale, nil
}

// rowsQueryer is the part of *sql.Tx, *sql.DB and *sql.Conn that reads
// many rows.
type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readFloors runs the floors query of chunk's scopes.
func (f *Fences) readFloors(ctx context.Context, tx Queryer, query string, chunk []fence.Token, args []any) (map[string]int64, error) {
	for _, t := range chunk {
		args = append(args, t.Scope)
	}
	rq, ok := tx.(rowsQueryer)
	if !ok {
		// A Queryer without QueryContext: one floor at a time.
		got := make(map[string]int64, len(chunk))
		for _, t := range chunk {
			e, err := f.floorOf(ctx, tx, t.Scope)
			if err != nil {
				return nil, err
			}
			got[t.Scope] = e
		}
		return got, nil
	}
	rows, err := rq.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]int64, len(chunk))
	for rows.Next() {
		var s string
		var e int64
		if err := rows.Scan(&s, &e); err != nil {
			return nil, err
		}
		got[s] = e
	}
	return got, rows.Err()
}
