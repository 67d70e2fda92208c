package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// testWait bounds every wait of these tests on an event; reaching it
// fails the test.
const testWait = 30 * time.Second

// lockedDB opens the SQLite database of a new file twice (as two processes
// would), waiting for the write lock as w says, and takes the write lock
// with the first: it returns the second and the transaction that holds the
// lock.
func lockedDB(t *testing.T, w busyWait) (*sql.DB, *sql.Tx) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := openSQLite(path, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	if _, err := holder.Exec("CREATE TABLE t (v INTEGER)"); err != nil {
		t.Fatal(err)
	}
	waiter, err := openSQLite(path, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	if err := waiter.Ping(); err != nil { // its connection opens before the lock is taken
		t.Fatal(err)
	}
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	return waiter, tx
}

// begun is the outcome of a BeginTx.
type begun struct {
	tx  *sql.Tx
	err error
}

func beginAsync(ctx context.Context, db *sql.DB) <-chan begun {
	out := make(chan begun, 1)
	go func() {
		tx, err := db.BeginTx(ctx, nil)
		out <- begun{tx, err}
	}()
	return out
}

// step lets the waiter's next sleep pass: it waits until the waiter sleeps
// (sleeping), and advances fc past the longest interval between two
// attempts.
func step(t *testing.T, fc *clockwork.FakeClock, w busyWait, res <-chan begun) {
	t.Helper()
	sleeping(t, fc, res)
	fc.Advance(w.poll * 3 / 2)
}

// sleeping waits until the waiter sleeps on fc between two attempts, and
// checks that it has not returned.
func sleeping(t *testing.T, fc *clockwork.FakeClock, res <-chan begun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the waiting writer did not sleep between attempts on its clock: %v", err)
	}
	select {
	case b := <-res:
		t.Fatalf("BeginTx returned while another connection holds the write lock: %v", b.err)
	default:
	}
}

// A writer that meets the write lock tries again at short fixed intervals
// on its clock, however long it waited already, and takes the lock at the
// first attempt after the holder commits.
func TestWriteLockWaitPolls(t *testing.T) {
	fc := clockwork.NewFakeClock()
	w := busyWait{poll: time.Millisecond, timeout: time.Hour, clock: fc}
	waiter, held := lockedDB(t, w)
	res := beginAsync(context.Background(), waiter)
	for range 50 {
		step(t, fc, w, res)
	}
	// The holder commits while the waiter sleeps; its next attempt takes
	// the lock.
	sleeping(t, fc, res)
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	fc.Advance(w.poll * 3 / 2)
	select {
	case b := <-res:
		if b.err != nil {
			t.Fatal(b.err)
		}
		finish(t, b.tx)
	case <-time.After(testWait):
		t.Fatal("the writer did not take the write lock at its first attempt after the holder's commit")
	}
}

func finish(t *testing.T, tx *sql.Tx) {
	t.Helper()
	if _, err := tx.Exec("INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// The wait ends with ErrBusy once it has lasted the bound, and with the
// call's context when that ends first; the transaction did not start.
func TestWriteLockWaitEnds(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		w := busyWait{poll: time.Millisecond, timeout: 20 * time.Millisecond, clock: fc}
		waiter, _ := lockedDB(t, w)
		start := fc.Now()
		res := beginAsync(context.Background(), waiter)
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		for {
			blocked := make(chan error, 1)
			go func() { blocked <- fc.BlockUntilContext(ctx, 1) }()
			select {
			case b := <-res:
				if !errors.Is(b.err, ErrBusy) {
					t.Fatalf("BeginTx after the bound: %v, want an error wrapping ErrBusy", b.err)
				}
				if b.tx != nil {
					t.Fatal("a transaction started")
				}
				if fc.Since(start) < w.timeout {
					t.Fatalf("gave up after %v of its clock, before the bound %v", fc.Since(start), w.timeout)
				}
				return
			case err := <-blocked:
				if err != nil {
					t.Fatal(err)
				}
				fc.Advance(w.poll * 3 / 2)
			}
		}
	})
	t.Run("context", func(t *testing.T) {
		fc := clockwork.NewFakeClock()
		w := busyWait{poll: time.Millisecond, timeout: time.Hour, clock: fc}
		waiter, _ := lockedDB(t, w)
		ctx, cancel := context.WithCancel(context.Background())
		res := beginAsync(ctx, waiter)
		step(t, fc, w, res)
		bctx, bcancel := context.WithTimeout(context.Background(), testWait)
		defer bcancel()
		if err := fc.BlockUntilContext(bctx, 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		b := <-res
		if !errors.Is(b.err, context.Canceled) || errors.Is(b.err, ErrBusy) {
			t.Fatalf("BeginTx after its context ended: %v, want context.Canceled", b.err)
		}
	})
}
