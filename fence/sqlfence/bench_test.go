package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// BenchmarkUpdate compares, side by side on the same table, an UPDATE in
// its own transaction ("plain": BEGIN, UPDATE, COMMIT) with the same
// UPDATE fenced ("fenced": BEGIN, advance, UPDATE, COMMIT via Fences.Do), on
// PostgreSQL and on SQLite.
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
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	if err := (sqlfence.Fencer{DB: db, Fences: f}).Advance(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, update, i%1000); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
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
}
