package sqlfence

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode"

	"github.com/tenure-go/tenure/fence"
)

// Guard is the name of the relation that a statement given to ExecGuarded
// reads to gate its write. It holds one row, with the column epoch, if the
// token was admitted, and none if it is stale. Write the statement so
// that it changes nothing when Guard is empty:
//
//	UPDATE accounts SET balance = balance + $1 WHERE id = $2
//	    AND EXISTS (SELECT 1 FROM tenure_fence)
//	INSERT INTO events (id, body) SELECT $1, $2 FROM tenure_fence
//	DELETE FROM sessions WHERE id = $1 AND EXISTS (SELECT 1 FROM tenure_fence)
//
// An upsert selects from Guard: INSERT INTO kv (k, v) SELECT $1, $2 FROM
// tenure_fence WHERE true ON CONFLICT (k) DO UPDATE SET v = excluded.v
// (SQLite needs the WHERE before ON CONFLICT). The name shadows a table of
// the same name in that statement.
const Guard = "tenure_fence"

// cachedGuards is how many argument counts (0 to 15) have their
// PostgreSQL definition of Guard built in advance.
const cachedGuards = 16

// guardStatements holds the definitions of Guard: on PostgreSQL, a
// data-modifying common table expression that advances the token and
// returns the row it raised, with the token's two parameters after the
// statement's own; on SQLite, a query of the floor (the token's two
// parameters come first).
type guardStatements struct {
	table    string
	postgres [cachedGuards]string // by number of the statement's arguments
	sqlite   string
}

func newGuardStatements(d Dialect, table string) guardStatements {
	g := guardStatements{table: table}
	if d == SQLite {
		g.sqlite = Guard + " AS (SELECT epoch FROM " + table + " WHERE scope = ? AND epoch <= ?)"
		return g
	}
	for n := range cachedGuards {
		g.postgres[n] = g.buildPostgres(n)
	}
	return g
}

func (g *guardStatements) buildPostgres(nargs int) string {
	return Guard + " AS (" + upsertPrefix(g.table) + "(" + Postgres.Placeholder(nargs+1) + ", " +
		Postgres.Placeholder(nargs+2) + ")" + upsertSuffix + " RETURNING f.epoch)"
}

// forPostgres returns Guard's definition after nargs arguments.
func (g *guardStatements) forPostgres(nargs int) string {
	if nargs < cachedGuards {
		return g.postgres[nargs]
	}
	return g.buildPostgres(nargs)
}

// ExecGuarded runs query, an INSERT, UPDATE or DELETE that reads Guard to
// gate its write, with t checked and recorded as Advance does, and
// returns the query's result. The query takes args as if it ran alone
// (placeholders $1, $2, ... on PostgreSQL, ? on SQLite); ExecGuarded adds
// the token's own. It returns a *fence.StaleError (errors.Is
// fence.ErrStale) if t is stale, and then the query has changed nothing;
// roll tx back. A query that affects no row although t was admitted (an
// UPDATE whose WHERE matched nothing) returns its result and no error. A
// query that never names Guard is refused with ErrInvalidQuery before it
// runs, since nothing would gate its write (ExecGuarded checks only that
// the name appears).
//
// On PostgreSQL the check, the record and the write are one statement:
// Guard is a common table expression that advances t's floor,
//
//	WITH tenure_fence AS (INSERT INTO tenure_fences AS f (scope, epoch)
//	    VALUES ($n+1, $n+2) ON CONFLICT (scope) DO UPDATE
//	    SET epoch = excluded.epoch WHERE f.epoch <= excluded.epoch
//	    RETURNING f.epoch)
//	<query>
//
// (merged into the query's own WITH list if it has one), so a fenced
// write costs one round trip, as the same write unfenced does, where Exec
// costs two. It holds the scope's row until tx ends, as Advance does. The
// statement is atomic by itself: tx may be a *sql.DB, and the fenced write
// then commits on its own. Like any one statement under READ COMMITTED,
// its snapshot is taken when it starts: if it waited for the scope's row
// held by another transaction, it does not see the rows that transaction
// inserted (rows it updated are rechecked by PostgreSQL as usual). A new
// owner's Fencer.Advance, which runs before its first write, is what waits
// out the old owner's transactions.
//
// SQLite has no data-modifying common table expression. There
// ExecGuarded advances t with a statement of its own first (stopping if t
// is stale), then runs the query with Guard reading t's floor, so that
// the write still lands only if no newer epoch has been recorded by then;
// tx may be a *sql.DB there too. Guard's two parameters come first there,
// so the query's placeholders must be plain ? (not ?NNN or named ones).
// The engine runs in-process, so the second statement costs no round
// trip; Exec and Do cost a little less there still.
func (f *Fences) ExecGuarded(ctx context.Context, tx Queryer, t fence.Token, query string, args ...any) (sql.Result, error) {
	if err := f.check(ctx, tx); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if !containsFold(query, Guard) {
		return nil, fmt.Errorf("%w: the statement never reads %s, so nothing would guard its write", ErrInvalidQuery, Guard)
	}
	var stmt string
	var all []any
	if f.cfg.Dialect == Postgres {
		stmt = withGuard(query, f.guard.forPostgres(len(args)))
		all = append(args[:len(args):len(args)], t.Scope, t.Epoch)
	} else {
		if err := f.advanceValid(ctx, tx, t); err != nil {
			return nil, err
		}
		stmt = withGuard(query, f.guard.sqlite)
		all = append([]any{t.Scope, t.Epoch}, args...)
	}
	res, err := tx.ExecContext(ctx, stmt, all...)
	if err != nil {
		return nil, fmt.Errorf("sqlfence: guarded statement under %s: %w", t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("sqlfence: guarded statement under %s: rows affected: %w", t, err)
	}
	if n > 0 {
		f.admittedGuarded()
		return res, nil
	}
	// No row: either Guard was empty (t is stale) or the write matched
	// nothing. The floor tells which: it is above t.Epoch only if t is
	// stale, and it cannot drop below it.
	cur, err := f.floorOf(ctx, tx, t.Scope)
	if err != nil {
		return nil, fmt.Errorf("sqlfence: guarded statement under %s affected no row; reading the current epoch: %w", t, err)
	}
	if cur > t.Epoch {
		f.metrics.Rejected(t.Scope)
		return nil, &fence.StaleError{Scope: t.Scope, Presented: t.Epoch, Current: cur}
	}
	f.admittedGuarded()
	return res, nil
}

// withGuard puts Guard's definition cte in front of query, inside query's
// own WITH list if it starts with one.
func withGuard(query, cte string) string {
	word, rest := nextWord(query)
	if !strings.EqualFold(word, "WITH") {
		return "WITH " + cte + " " + query
	}
	if w, r := nextWord(rest); strings.EqualFold(w, "RECURSIVE") {
		return "WITH RECURSIVE " + cte + ", " + strings.TrimLeftFunc(r, unicode.IsSpace)
	}
	return "WITH " + cte + ", " + strings.TrimLeftFunc(rest, unicode.IsSpace)
}

// nextWord splits s, after leading space, into its first word of letters,
// digits and underscores and the rest.
func nextWord(s string) (word, rest string) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	i := strings.IndexFunc(s, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// containsFold reports whether s contains sub, a lower-case ASCII word,
// ignoring ASCII case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// admittedGuarded counts the token of a guarded statement that landed or
// matched nothing under a current floor; on SQLite the advance before the
// statement counted it already.
func (f *Fences) admittedGuarded() {
	if f.cfg.Dialect == Postgres {
		f.metrics.Admitted(1)
	}
}
