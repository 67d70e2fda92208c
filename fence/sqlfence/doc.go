// Package sqlfence applies fencing inside SQL databases, over database/sql:
// the database, not the lock, rejects a writer whose tenure has ended.
//
// A fences table holds, per scope, the highest epoch admitted so far (the
// scope's floor):
//
//	CREATE TABLE tenure_fences (scope TEXT PRIMARY KEY, epoch BIGINT NOT NULL)
//
// (on PostgreSQL WITH (fillfactor = 10): every fenced write rewrites its
// scope's row, and sparse pages keep the row's chain of versions short; for
// a table created without it, ALTER TABLE tenure_fences SET (fillfactor =
// 10) applies to the pages written from then on, VACUUM FULL to all).
//
// Advancing a token inside the caller's transaction is one statement,
//
//	INSERT INTO tenure_fences AS f (scope, epoch) VALUES (<scope>, <epoch>)
//	ON CONFLICT (scope) DO UPDATE SET epoch = excluded.epoch
//	WHERE f.epoch <= excluded.epoch
//
// which inserts or raises the scope's row iff the token's epoch is at least
// the recorded one; no row affected means the token is stale, and the
// transaction must not commit its writes. Because the statement writes the
// scope's row, it holds that row's lock until the transaction ends: a newer
// owner's Advance waits for an older owner's transaction in flight, so the
// database's commit order never shows an older epoch after a newer one for
// the same scope. (PostgreSQL locks the row; SQLite serializes all writers.)
//
// Advance is the one verb for raising or checking a floor, as across
// tenure:
//
//   - Fences.Advance checks and records a token inside the caller's
//     transaction; Fences.Exec runs the caller's own UPDATE, INSERT or
//     DELETE after it in the same transaction, and Fences.Do wraps a whole
//     transaction.
//   - Fences.ExecGuarded runs the caller's write and the check in one
//     statement on PostgreSQL (one round trip, as for the write unfenced);
//     the write reads the relation Guard to gate itself.
//   - Fencer raises a floor in a transaction of its own, as a new owner
//     does before its first write: it is a fence.Fencer. Its AdvanceAll
//     raises the floors of many scopes in one transaction (Fences.AdvanceAll
//     inside the caller's), as a node does for all the partitions it
//     acquires at once.
//   - Batcher is group commit: the fenced writes of many goroutines
//     committed together in one transaction that advances each distinct
//     token once; the caller's Writer writes them, and each caller gets
//     its own answer (a stale write is refused alone).
//
// Every refusal is a *fence.StaleError with the scope, the presented epoch
// and the current one, or for AdvanceAll a *StaleTokensError holding one per
// stale token; errors.Is(err, fence.ErrStale) holds.
//
// Two dialects are supported: PostgreSQL (with any database/sql driver, such
// as pgx's stdlib) and SQLite 3.24 or later (such as modernc.org/sqlite).
//
// On PostgreSQL the default READ COMMITTED isolation suits: the advancing
// statement waits for a concurrent transaction that holds the scope's row
// and then judges the newest committed epoch. Under REPEATABLE READ or
// SERIALIZABLE the same conflict ends in a serialization failure (SQLSTATE
// 40001) instead, which the caller retries as usual. On SQLite, open the
// database with a busy timeout and immediate transactions (for
// modernc.org/sqlite: ?_pragma=busy_timeout(5000)&_txlock=immediate), so
// that concurrent writers queue instead of failing with SQLITE_BUSY.
// SQLite's own busy handler sleeps longer the longer a writer has waited
// (1, 2, 5, 10 ... up to 100ms between attempts), so under steady writes
// from several processes a fence raise can wait tens of milliseconds while
// the others take the lock in the gaps; the examples' databases
// (examples/internal/sqldb) wait for the lock in Go instead, with attempts
// about half a millisecond apart.
//
// Every function refuses a nil argument (a nil *sql.DB or *sql.Tx included,
// even inside a Queryer) with an error wrapping ErrNilArgument.
package sqlfence
