package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// closesTable records one row per closed period. Its primary key (job,
// tenant, period_start) is the second line of defence: the fence refuses a
// former leader's write, and the key refuses a second close of the same
// period by anyone.
const closesTable = "period_closes"

// ledger is the database side of the job: which periods are closed, and the
// fenced write that closes one. It is safe for concurrent use.
type ledger struct {
	db      *sql.DB
	dialect sqlfence.Dialect
	fences  *sqlfence.Fences
	job     string

	lastEndQuery string
	insert       string
	closedBy     string
}

func newLedger(db *sql.DB, dialect sqlfence.Dialect, job string) (*ledger, error) {
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	if err != nil {
		return nil, err
	}
	p := dialect.Placeholder
	return &ledger{
		db: db, dialect: dialect, fences: fences, job: job,
		lastEndQuery: "SELECT MAX(period_end) FROM " + closesTable + " WHERE job = " + p(1) + " AND tenant = " + p(2),
		insert: "INSERT INTO " + closesTable + " (job, tenant, period_start, period_end, closed_by, epoch, closed_at) VALUES (" +
			p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ", " + p(5) + ", " + p(6) + ", " + p(7) + ")",
		closedBy: "SELECT closed_by, epoch FROM " + closesTable + " WHERE job = " + p(1) + " AND tenant = " + p(2) + " AND period_start = " + p(3),
	}, nil
}

// fencer is the election's fencer: it raises the job's floor to each new
// term's epoch before the term's first read.
func (l *ledger) fencer() fence.Fencer { return sqlfence.Fencer{DB: l.db, Fences: l.fences} }

// createSchema creates the fences table and the closes table if they do not
// exist. Several processes starting together may run it at once.
func (l *ledger) createSchema(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if l.dialect == sqlfence.Postgres {
		// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's
		// catalog; one lock serializes the processes starting together.
		// (SQLite's immediate transactions are serialized already.)
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7306105)"); err != nil {
			return fmt.Errorf("create schema: lock: %w", err)
		}
	}
	if err := l.fences.CreateTable(ctx, tx); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	const ddl = "CREATE TABLE IF NOT EXISTS " + closesTable + ` (
	job          TEXT   NOT NULL,
	tenant       TEXT   NOT NULL,
	period_start BIGINT NOT NULL, -- Unix milliseconds
	period_end   BIGINT NOT NULL,
	closed_by    TEXT   NOT NULL, -- node ID
	epoch        BIGINT NOT NULL, -- the leader's fencing token
	closed_at    BIGINT NOT NULL,
	PRIMARY KEY (job, tenant, period_start))`
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create schema: %s: %w", closesTable, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: commit: %w", err)
	}
	return nil
}

// nextPeriod returns the start of the first period of tenant not closed
// yet: the end of the last closed one, or, if none is, the period that had
// ended last at now.
func (l *ledger) nextPeriod(ctx context.Context, tenant string, length time.Duration, now time.Time) (time.Time, error) {
	var end sql.NullInt64
	if err := l.db.QueryRowContext(ctx, l.lastEndQuery, l.job, tenant).Scan(&end); err != nil {
		return time.Time{}, fmt.Errorf("last closed period of %s: %w", tenant, err)
	}
	if !end.Valid {
		return firstPeriod(now, length), nil
	}
	return fromMillis(end.Int64), nil
}

// closing is one run: close tenant's period [start, end) under token.
type closing struct {
	tenant     string
	start, end time.Time
	node       string
	token      fence.Token
}

// errAlreadyClosed reports a run refused by the primary key: the period was
// closed already, by the node and epoch it names.
var errAlreadyClosed = errors.New("period already closed")

// close records the run in one transaction in which the token is checked
// and recorded first (sqlfence.Fences.Do): the row commits only if no newer
// leader has fenced the job meanwhile. A real job writes its effects (the
// invoices of the period) in the same transaction, so that they commit with
// the record or not at all. On PostgreSQL the record alone could be one
// statement with Fences.ExecGuarded.
//
// It returns an error matching fence.ErrStale if a newer leader fenced the
// job, and errAlreadyClosed if the period's row exists.
func (l *ledger) close(ctx context.Context, c closing) error {
	err := l.fences.Do(ctx, l.db, c.token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, l.insert, l.job, c.tenant, c.start.UnixMilli(), c.end.UnixMilli(),
			c.node, c.token.Epoch, time.Now().UnixMilli())
		return err
	})
	if err == nil || errors.Is(err, fence.ErrStale) {
		return err
	}
	// A failed insert: tell a duplicate key (whatever the driver's error
	// looks like) from other failures by looking for the row.
	var by string
	var epoch int64
	if qerr := l.db.QueryRowContext(ctx, l.closedBy, l.job, c.tenant, c.start.UnixMilli()).Scan(&by, &epoch); qerr == nil {
		return fmt.Errorf("%w by %s at epoch %d", errAlreadyClosed, by, epoch)
	}
	return err
}
