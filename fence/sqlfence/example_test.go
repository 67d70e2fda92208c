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

// A node that acquires many partitions at once raises all their floors in
// one transaction; a partition whose floor is already newer is named.
func ExampleFencer_AdvanceAll() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	fences, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite})
	if err != nil {
		log.Fatal(err)
	}
	if err := fences.CreateTable(ctx, db); err != nil {
		log.Fatal(err)
	}
	fencer := sqlfence.Fencer{DB: db, Fences: fences}

	acquired := make([]fence.Token, 1024)
	for p := range acquired {
		acquired[p] = fence.Token{Scope: fence.PartitionScope(p), Epoch: 300}
	}
	fmt.Println(fencer.AdvanceAll(ctx, acquired))

	// Partition 7 has moved on to a newer owner meanwhile.
	if err := fencer.Advance(ctx, fence.Token{Scope: fence.PartitionScope(7), Epoch: 420}); err != nil {
		log.Fatal(err)
	}
	for p := range acquired {
		acquired[p].Epoch = 400
	}
	err = fencer.AdvanceAll(ctx, acquired)
	var stale *sqlfence.StaleTokensError
	if errors.As(err, &stale) {
		fmt.Println(stale.Advanced, "advanced; stale:", stale.Stale[0].Scope)
	}
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(err)
	// Output:
	// <nil>
	// 1023 advanced; stale: p/7
	// true
	// sqlfence: 1 stale token (1023 others advanced): "p/7" epoch 400 < current epoch 420
}

// A fenced write in one statement: the UPDATE reads sqlfence.Guard, which
// is empty if the token is stale. On PostgreSQL the check, the record of
// the epoch and the write are one round trip.
func ExampleFences_ExecGuarded() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
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

	// On PostgreSQL: ... balance + $1 WHERE id = $2 AND EXISTS ...
	const deposit = "UPDATE accounts SET balance = balance + ? WHERE id = ? AND EXISTS (SELECT 1 FROM tenure_fence)"
	old := fence.Token{Scope: fence.PartitionScope(4), Epoch: 100}
	cur := fence.Token{Scope: fence.PartitionScope(4), Epoch: 250}

	res, err := fences.ExecGuarded(ctx, db, cur, deposit, 10, 1)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := res.RowsAffected()
	fmt.Println(n)
	_, err = fences.ExecGuarded(ctx, db, old, deposit, 1000, 1) // a paused old owner resumes
	fmt.Println(err)

	var balance int
	if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println(balance)
	// Output:
	// 1
	// fence: stale token for scope "p/4": epoch 100 < current epoch 250
	// 110
}
