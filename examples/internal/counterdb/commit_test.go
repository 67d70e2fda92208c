package counterdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
)

// testPartitions is the partition count the tests' stores count by.
const testPartitions = 32

// newTestStore returns a store on a fresh SQLite database with its schema.
func newTestStore(t testing.TB) (*Store, sqlfence.Fencer) {
	t.Helper()
	db, dialect, err := Open("sqlite:"+filepath.Join(t.TempDir(), "c.db"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	fences, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateSchema(context.Background(), db, dialect, fences); err != nil {
		t.Fatal(err)
	}
	return NewStore(db, dialect, fences, hclog.NewNullLogger(), NewMetrics(), false), sqlfence.Fencer{DB: db, Fences: fences}
}

// acquire raises p's floor to epoch, as the node does, and returns the
// loaded partition.
func acquire(t *testing.T, s *Store, f sqlfence.Fencer, p int, epoch int64) *Partition {
	t.Helper()
	tok := fence.Token{Scope: fence.PartitionScope(p), Epoch: epoch}
	if err := f.Advance(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	s.acquire(p, tok, testPartitions, false)
	part, err := s.partition(p, tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ready(context.Background(), part); err != nil {
		t.Fatal(err)
	}
	return part
}

// keyIn returns the first key prefix-<i> in partition p of testPartitions.
func keyIn(t *testing.T, prefix string, p int) string {
	t.Helper()
	for i := range 10000 {
		if k := fmt.Sprintf("%s-%d", prefix, i); ring.PartitionOf(k, testPartitions) == p {
			return k
		}
	}
	t.Fatalf("no key %s-* in partition %d", prefix, p)
	return ""
}

// TestCommitBatch writes one batch that holds two increments of a key, a
// retry of the first in the same batch, and an increment of another key,
// then an increment of a partition whose floor a newer owner raised: the
// stale one fails alone, the retry gets the first one's result, and a
// later retry gets the stored result.
func TestCommitBatch(t *testing.T) {
	s, f := newTestStore(t)
	ka, kz, kb := keyIn(t, "a", 1), keyIn(t, "z", 1), keyIn(t, "b", 2)
	p1 := acquire(t, s, f, 1, 5)
	p2 := acquire(t, s, f, 2, 5)
	if err := f.Advance(context.Background(), fence.Token{Scope: "p/2", Epoch: 9}); err != nil {
		t.Fatal(err)
	}
	c, err := NewCommitter(s, "n1", false, 16, 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mk := func(part *Partition, key, idem string) *incr {
		return &incr{part: part, key: key, idem: idem, delta: 1}
	}
	batch := []*incr{mk(p1, ka, "i1"), mk(p1, ka, "i2"), mk(p1, ka, "i1"), mk(p1, kz, "i4")}
	var got []Result
	ctx := context.Background()
	if err := s.fences.Do(ctx, s.db, p1.token, func(tx *sql.Tx) error {
		var err error
		got, err = c.write(ctx, tx, batch)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.committed(batch, got)
	want := []Result{{Value: 1}, {Value: 2}, {Value: 1, Dup: true}, {Value: 1}}
	for i, in := range batch {
		if got[i] != want[i] {
			t.Errorf("increment %d (%s): %+v, want %+v", i, in.idem, got[i], want[i])
		}
	}
	var se *fence.StaleError
	if r := c.Submit(p2, kb, "i3", 1); !errors.As(r.Err, &se) || se.Current != 9 {
		t.Errorf("increment of the fenced partition: %v, want a *fence.StaleError at current epoch 9", r.Err)
	}
	// The stale partition refuses everything from now on, without a transaction.
	if r := c.Submit(p2, kb, "i5", 1); !errors.Is(r.Err, fence.ErrStale) {
		t.Errorf("after the stale refusal: %v, want fence.ErrStale", r.Err)
	}
	// A retry in a later transaction gets the stored result.
	if r := c.Submit(p1, ka, "i2", 1); r != (Result{Value: 2, Dup: true}) {
		t.Errorf("retry of i2: %+v, want value 2, duplicate", r)
	}
	if r := c.Submit(p1, ka, "i6", 1); r != (Result{Value: 3}) {
		t.Errorf("next increment: %+v, want 3", r)
	}
	// An idempotency key used before for another counter is refused.
	if r := c.Submit(p1, kz, "i6", 1); !errors.Is(r.Err, ErrKeyReused) {
		t.Errorf("i6 reused for z: %+v, want ErrKeyReused", r)
	}
	counters := readCounters(t, s.db)
	if len(counters) != 2 || counters[ka] != 3 || counters[kz] != 1 {
		t.Errorf("counters %v, want %s=3 %s=1", counters, ka, kz)
	}
	applied, err := ReadApplied(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(applied); n != 4 {
		t.Errorf("%d increments applied, want 4", n)
	}

	// A new tenure of partition 1 loads what the previous one committed;
	// the old one's state is gone and its token refused.
	s.release(1, p1.token)
	if _, err := s.partition(1, p1.token); !errors.Is(err, ownership.ErrMoved) {
		t.Errorf("partition under a released token: %v, want ownership.ErrMoved", err)
	}
	p1b := acquire(t, s, f, 1, 12)
	if v := p1b.Value(ka); v != 3 {
		t.Errorf("after reload a = %d, want 3", v)
	}
	if r := c.Submit(p1, ka, "i7", 1); r.Err == nil {
		t.Errorf("increment under the released tenure succeeded: %+v", r)
	}
}

// TestGroupCommit sends concurrent increments through the group committer
// and checks that they are batched and counted once each.
func TestGroupCommit(t *testing.T) {
	s, f := newTestStore(t)
	p := acquire(t, s, f, 3, 7)
	c, err := NewCommitter(s, "n1", true, 64, 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	results := make(chan Result, n)
	for i := range n {
		go func() { results <- c.Submit(p, "k", fmt.Sprintf("g%d", i), 1) }()
	}
	seen := make(map[int64]bool)
	for range n {
		r := <-results
		if r.Err != nil || r.Dup || seen[r.Value] {
			t.Errorf("result %+v (seen before: %v)", r, seen[r.Value])
		}
		seen[r.Value] = true
	}
	c.Close()
	if v := readCounters(t, s.db)["k"]; v != n {
		t.Errorf("k = %d, want %d", v, n)
	}
}

// readCounters returns the counters in db.
func readCounters(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	c, err := ReadCounters(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadsLeaveWritesOnSQLite: SQLite's twin of
// TestLoadsLeaveTheFenceAConnection (PostgreSQL), where no session can
// hold a read (WAL readers take no lock that a writer's would block): the
// reads a store lets run at once leave the committer and a fence raise
// connections of the pool, and a fence raise goes through while that many
// reads hold theirs.
func TestReadsLeaveWritesOnSQLite(t *testing.T) {
	s, f := newTestStore(t)
	conns := s.db.Stats().MaxOpenConnections
	if got, want := cap(s.reading), conns-reservedConns; got != want {
		t.Fatalf("reads at once: %d, want the pool's %d connections but %d", got, conns, reservedConns)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var held []*sql.Conn // what every read slot taken would hold
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range cap(s.reading) {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	committer, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatalf("the committer's connection while every read slot holds one: %v", err)
	}
	defer committer.Close()
	if err := f.AdvanceAll(ctx, []fence.Token{{Scope: fence.PartitionScope(0), Epoch: 1}}); err != nil {
		t.Fatalf("a fence raise while every read slot holds a connection: %v", err)
	}
}
