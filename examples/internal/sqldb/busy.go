package sqldb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tenure-go/tenure/internal/clock"
)

// SQLite has one writer at a time: a write transaction (BEGIN IMMEDIATE)
// that finds another process holding the write lock fails with
// SQLITE_BUSY. SQLite's own busy handler (PRAGMA busy_timeout) retries
// after sleeps that grow with the wait (1, 2, 5, 10, 15, 20, 25 ... 100ms),
// so a writer that met the lock a few times sleeps 10 to 25ms while the
// processes that keep committing take the lock in the gaps: under steady
// writes from several processes, a transaction such as a new owner's fence
// raise waited 35 to 57ms. SQLite connections opened here have no busy
// handler; the write lock is waited for in Go instead, with attempts a
// short fixed interval apart (busyWait), for as long as the call's context
// allows and at most busyTimeout, so that a writer gets the lock within
// about busyPoll of its release whatever it waited already.

// Timing of the wait for SQLite's write lock.
const (
	// busyPoll is the mean interval between two attempts to take the lock
	// (each one waits between half of it and one and a half times it, so
	// that the processes waiting do not attempt in step).
	busyPoll = 500 * time.Microsecond
	// busyTimeout bounds the wait of one call: it then fails with an
	// error wrapping ErrBusy.
	busyTimeout = 10 * time.Second
)

// ErrBusy reports that a call on SQLite waited for the database's write
// lock (SQLITE_BUSY) for as long as it may; the error wraps the driver's
// too. The call did nothing: retrying it is safe.
var ErrBusy = errors.New("sqldb: the SQLite database stayed locked by another connection")

// busyWait says how a connection waits for SQLite's write lock.
type busyWait struct {
	poll    time.Duration // mean interval between attempts
	timeout time.Duration // bound of one call's wait
	clock   clockwork.Clock
}

// retry runs op until it does not fail with SQLITE_BUSY, sleeping about
// w.poll between attempts, until ctx ends or w.timeout has passed, and
// returns what its last attempt returned.
func retry[T any](ctx context.Context, w busyWait, what string, op func() (T, error)) (T, error) {
	var began time.Time
	for {
		v, err := op()
		if !busy(err) {
			return v, err
		}
		now := w.clock.Now()
		if began.IsZero() {
			began = now
		}
		if now.Sub(began) >= w.timeout {
			return v, fmt.Errorf("%w: %s after %v: %w", ErrBusy, what, w.timeout, err)
		}
		d := w.poll/2 + rand.N(w.poll)
		if !clock.Sleep(ctx, w.clock, d) {
			return v, fmt.Errorf("sqldb: %s: waiting for the write lock: %w (%w)", what, context.Cause(ctx), err)
		}
	}
}

// busy reports whether err is SQLite's SQLITE_BUSY, which a statement
// returns when it could not take a lock and so did nothing. It is false
// for SQLITE_BUSY_SNAPSHOT, which a retry in the same transaction cannot
// cure.
func busy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code()&0xff == sqlite3.SQLITE_BUSY && se.Code() != sqlite3.SQLITE_BUSY_SNAPSHOT
}

// busyConnector opens connections of the inner connector (modernc.org/sqlite,
// opened without a busy handler) that wait for the write lock as w says.
type busyConnector struct {
	inner driver.Connector
	w     busyWait
}

func (c *busyConnector) Driver() driver.Driver { return c.inner.Driver() }

func (c *busyConnector) Connect(ctx context.Context) (driver.Conn, error) {
	// Its pragmas (journal_mode) may meet the lock.
	conn, err := retry(ctx, c.w, "connect", func() (driver.Conn, error) { return c.inner.Connect(ctx) })
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(busyInner)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("sqldb: the SQLite driver's connection %T lacks the methods the wait for the write lock uses", conn)
	}
	return &busyConn{busyInner: inner, w: c.w}, nil
}

// busyInner is what a busyConn needs of the driver's connection.
type busyInner interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// busyConn is a connection whose calls wait for the write lock in Go: the
// start of a transaction, and a statement outside one (a statement inside
// a transaction fails as the driver says; with BEGIN IMMEDIATE in WAL mode
// it does not meet the lock). database/sql uses a connection from one
// goroutine at a time.
type busyConn struct {
	busyInner
	w    busyWait
	inTx bool
}

func (c *busyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := retry(ctx, c.w, "begin", func() (driver.Tx, error) { return c.busyInner.BeginTx(ctx, opts) })
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &busyTx{Tx: tx, c: c}, nil
}

// Begin is driver.Conn's: database/sql calls BeginTx.
func (c *busyConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *busyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return outsideTx(ctx, c, "exec", func() (driver.Result, error) { return c.busyInner.ExecContext(ctx, query, args) })
}

func (c *busyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return outsideTx(ctx, c, "query", func() (driver.Rows, error) { return c.busyInner.QueryContext(ctx, query, args) })
}

// outsideTx runs the statement op of c: once inside a transaction, else
// waiting for the write lock as c.w says.
func outsideTx[T any](ctx context.Context, c *busyConn, what string, op func() (T, error)) (T, error) {
	if c.inTx {
		return op()
	}
	return retry(ctx, c.w, what, op)
}

// busyTx marks its connection out of the transaction once it ends.
type busyTx struct {
	driver.Tx
	c *busyConn
}

func (t *busyTx) Commit() error {
	t.c.inTx = false
	return t.Tx.Commit()
}

func (t *busyTx) Rollback() error {
	t.c.inTx = false
	return t.Tx.Rollback()
}
