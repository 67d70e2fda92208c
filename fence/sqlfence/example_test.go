package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// A paused owner wakes up after a new owner has taken its partition: the
// database refuses its update.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: one in-memory database

	fences, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite})
	if err != nil {
		log.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO accounts VALUES (1, 100)"); err != nil {
		log.Fatal(err)
	}

	deposit := func(t fence.Token, amount int) error {
		return fences.Do(ctx, db, t, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = 1", amount)
			return err
		})
	}
	old := fence.Token{Scope: fence.PartitionScope(4), Epoch: 100}
	cur := fence.Token{Scope: fence.PartitionScope(4), Epoch: 250}

	fmt.Println(deposit(old, 10))
	// The partition moves; the new owner raises the floor before any work.
	fencer := sqlfence.Fencer{DB: db, Fences: fences}
	if err := fencer.Advance(ctx, cur); err != nil {
		log.Fatal(err)
	}
	err = deposit(old, 1000) // the old owner resumes
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	fmt.Println(deposit(cur, 5))

	var balance int
	if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println(balance)
	// Output:
	// <nil>
	// true
	// fence: stale token for scope "p/4": epoch 100 < current epoch 250
	// <nil>
	// 115
}
