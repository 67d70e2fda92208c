package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// BenchmarkUpdate compares, side by side on the same table, an UPDATE in
// its own transaction ("plain": BEGIN, UPDATE, COMMIT) with the same
// UPDATE fenced in two statements ("fenced": BEGIN, advance, UPDATE,
// COMMIT via Fences.Do) and in one ("guarded": BEGIN, ExecGuarded,
// COMMIT), on PostgreSQL and on SQLite. The autocommit pair runs the
// UPDATE without BEGIN and COMMIT ("plain-autocommit": db.ExecContext;
// "guarded-autocommit": ExecGuarded on the *sql.DB, one statement that
// commits on its own on PostgreSQL). "interleaved" runs plain, fenced and
// guarded in turn and reports their means and ratios to plain, which a
// noisy neighbour skews less than runs one after the other.
func BenchmarkUpdate(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		db := postgres(b)
		f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "bench_fences"})
		if err != nil {
			b.Fatal(err)
		}
		benchUpdate(b, db, f, "$1")
	})
	b.Run("sqlite", func(b *testing.B) {
		e := newSQLite(b, "bench")
		benchUpdate(b, e.db, e.fences, "?")
	})
}

func benchUpdate(b *testing.B, db *sql.DB, f *sqlfence.Fences, ph string) {
	ctx := context.Background()
	if err := f.CreateTable(ctx, db); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		"DROP TABLE IF EXISTS bench_accounts",
		"CREATE TABLE bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		if _, err := db.ExecContext(ctx, "INSERT INTO bench_accounts (id, balance) VALUES ("+ph+", 0)", i); err != nil {
			b.Fatal(err)
		}
	}
	update := "UPDATE bench_accounts SET balance = balance + 1 WHERE id = " + ph
	guarded := update + " AND EXISTS (SELECT 1 FROM tenure_fence)"
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	if err := (sqlfence.Fencer{DB: db, Fences: f}).Advance(ctx, tok); err != nil {
		b.Fatal(err)
	}
	// inTx runs exec in a transaction of its own per iteration.
	inTx := func(b *testing.B, exec func(tx *sql.Tx, i int) error) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := execInTx(ctx, db, func(tx *sql.Tx) error { return exec(tx, i) }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) {
		inTx(b, func(tx *sql.Tx, i int) error {
			_, err := tx.ExecContext(ctx, update, i%1000)
			return err
		})
	})
	b.Run("fenced", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			err := f.Do(ctx, db, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update, i%1000)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded", func(b *testing.B) {
		inTx(b, func(tx *sql.Tx, i int) error {
			_, err := f.ExecGuarded(ctx, tx, tok, guarded, i%1000)
			return err
		})
	})
	// interleaved runs one of each in turn, so that a noisy neighbour
	// slows all three alike, and reports each one's mean and their ratios.
	b.Run("interleaved", func(b *testing.B) {
		b.ReportAllocs()
		var plain, fenced, guard time.Duration
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			if err := execInTx(ctx, db, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update, i%1000)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := f.Do(ctx, db, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update, i%1000)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := execInTx(ctx, db, func(tx *sql.Tx) error {
				_, err := f.ExecGuarded(ctx, tx, tok, guarded, i%1000)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			plain, fenced, guard = plain+t1.Sub(t0), fenced+t2.Sub(t1), guard+t3.Sub(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/op")
		b.ReportMetric(float64(fenced.Nanoseconds())/n, "fenced-ns/op")
		b.ReportMetric(float64(guard.Nanoseconds())/n, "guarded-ns/op")
		b.ReportMetric(float64(fenced)/float64(plain), "fenced/plain")
		b.ReportMetric(float64(guard)/float64(plain), "guarded/plain")
	})
	b.Run("plain-autocommit", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := db.ExecContext(ctx, update, i%1000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-autocommit", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := f.ExecGuarded(ctx, db, tok, guarded, i%1000); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// execInTx runs exec in a transaction of db: BEGIN, exec, COMMIT.
func execInTx(ctx context.Context, db *sql.DB, exec func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := exec(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// BenchmarkAdvance1024 fences 1,024 partitions, as a node does when it
// acquires them together, side by side: with Fencer.Advance per partition
// (a transaction each: "1024xAdvance") and with one Fencer.AdvanceAll
// ("AdvanceAll"), on SQLite and PostgreSQL. Every iteration raises all
// 1,024 floors to a new epoch. ns/op is the time to fence all 1,024.
func BenchmarkAdvance1024(b *testing.B) {
	const partitions = 1024
	run := func(b *testing.B, fencer sqlfence.Fencer) {
		ctx := context.Background()
		if err := fencer.Fences.CreateTable(ctx, fencer.DB); err != nil {
			b.Fatal(err)
		}
		ts := make([]fence.Token, partitions)
		var epoch int64
		next := func() []fence.Token {
			epoch++
			for i := range ts {
				ts[i] = fence.Token{Scope: fence.PartitionScope(i), Epoch: epoch}
			}
			return ts
		}
		b.Run("1024xAdvance", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, t := range next() {
					if err := fencer.Advance(ctx, t); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("AdvanceAll", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := fencer.AdvanceAll(ctx, next()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("sqlite", func(b *testing.B) {
		e := newSQLite(b, "bench1024")
		run(b, sqlfence.Fencer{DB: e.db, Fences: e.fences})
	})
	b.Run("postgres", func(b *testing.B) {
		db := postgres(b)
		f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres, Table: "bench1024_fences"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS bench1024_fences"); err != nil {
			b.Fatal(err)
		}
		run(b, sqlfence.Fencer{DB: db, Fences: f})
	})
}
