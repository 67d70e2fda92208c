package counterdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership"
)

// TestLoadsLeaveTheFenceAConnection acquires more partitions at once than
// the PostgreSQL pool has connections, while their loads cannot finish
// (another session holds the counters table locked), as a process that
// takes over a leaving one's partitions does under load. The loads must
// leave connections to the writes of the critical path: a fence raise,
// with the committer's transaction open at the same time, goes through
// while every load waits. The pool is open before the first move
// (WarmPool), so that no fence raise waits for a connection to be made.
func TestLoadsLeaveTheFenceAConnection(t *testing.T) {
	spec, db, dialect := counterdbtest.DB(t, sqlfence.Postgres)
	ctx := t.Context()
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := counterdb.CreateSchema(ctx, db, dialect, fences); err != nil {
		t.Fatal(err)
	}
	if err := counterdb.WarmPool(ctx, db, dialect); err != nil {
		t.Fatal(err)
	}
	conns := db.Stats().MaxOpenConnections
	if st := db.Stats(); st.OpenConnections != conns || st.Idle != conns {
		t.Fatalf("after WarmPool: %d connections open, %d idle; want the pool's %d, all idle", st.OpenConnections, st.Idle, conns)
	}

	other, _, err := counterdb.Open(spec, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "LOCK TABLE "+counterdb.CountersTable+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			_ = lock.Rollback()
		}
	}()

	st := counterdb.NewStore(db, dialect, fences, hclog.NewNullLogger(), counterdb.NewMetrics(), false)
	acquired := st.Callbacks().OnAcquired
	const parts = 32
	for p := range conns + 4 {
		acquired(ownership.Event{Kind: ownership.EventAcquired, Partition: p, Partitions: parts, Token: fence.Token{Scope: fmt.Sprint(p), Epoch: 10}})
	}
	// Wait until the loads that may run hold their connections, blocked
	// on the lock; the others wait for a read of their own.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	waiting := func() int { return waitingOnCounters(t, other) }
	for waiting() < conns-2 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if n := waiting(); n > conns-2 {
		t.Fatalf("%d loads hold connections of a pool of %d: none is left for the committer and a fence raise", n, conns)
	}

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	committer, err := db.Conn(wctx)
	if err != nil {
		t.Fatalf("the committer's connection, while the loads wait: %v", err)
	}
	defer committer.Close()
	fencer := sqlfence.Fencer{DB: db, Fences: fences}
	if err := fencer.AdvanceAll(wctx, []fence.Token{{Scope: "moved", Epoch: 11}}); err != nil {
		t.Fatalf("a fence raise while the loads wait: %v", err)
	}

	locked = false
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	for db.Stats().InUse > 1 { // the loads end; the committer's connection stays
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
