package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/fence"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // substring; empty: valid
	}{
		{nil, ""},
		{[]string{"--period", "1s", "--ttl", "2s", "--hold", "200ms", "--tenants", "a, b"}, ""},
		{[]string{"--embedded-etcd", "/tmp/x", "--etcd", ""}, ""},
		{[]string{"--etcd", ""}, "--etcd or --embedded-etcd"},
		{[]string{"--id", ""}, "--id"},
		{[]string{"--period", "0s"}, "--period"},
		{[]string{"--period", "1500us"}, "--period"},
		{[]string{"--ttl", "1s"}, "--ttl 1s must be at least 2s"},
		{[]string{"--hold", "-1s"}, "--hold"},
		{[]string{"--tenants", " , "}, "--tenants"},
		{[]string{"--tenants", "a,b,a"}, `"a" twice`},
		{[]string{"--job", "a/b"}, "--job"},
		{[]string{"--job", "a b"}, "--job"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.err)
		}
	}
}

func TestOpenDBRefuses(t *testing.T) {
	for _, spec := range []string{"", "sqlite:", "sqlite:a?b", "mysql://x", "postgres://u:secret@h:bad/db"} {
		if _, _, err := openDB(spec, 2*time.Second); err == nil {
			t.Errorf("openDB(%q) accepted", spec)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("openDB(%q): the error shows the password: %v", spec, err)
		}
	}
}

func TestPeriods(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC)
	if got, want := firstPeriod(at, time.Minute), time.Date(2026, 3, 1, 10, 6, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("firstPeriod = %v, want %v", got, want)
	}
	if got, want := firstPeriod(at, time.Hour), time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("firstPeriod = %v, want %v", got, want)
	}
	start := time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC)
	if due(start, time.Minute, at) {
		t.Error("a period that has not ended is due")
	}
	if !due(start, time.Minute, start.Add(time.Minute)) {
		t.Error("a period is not due at its end")
	}
	if got := fromMillis(start.UnixMilli()); !got.Equal(start) {
		t.Errorf("fromMillis = %v", got)
	}
}

// TestLedger closes periods in-process, on SQLite or on the PostgreSQL of
// TENURE_PG_DSN: a former leader's token is refused once a newer leader's
// fencer has run, and a period is never closed twice.
func TestLedger(t *testing.T) {
	ctx := context.Background()
	_, db, dialect := testDB(t)
	l, err := newLedger(db, dialect, "ledger-test")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := l.createSchema(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC)
	old := fence.Token{Scope: fence.LeaderScope("ledger-test"), Epoch: 10}
	cur := fence.Token{Scope: old.Scope, Epoch: 20}
	if err := l.fencer().Advance(ctx, old); err != nil {
		t.Fatal(err)
	}
	start, err := l.nextPeriod(ctx, "acme", time.Minute, now)
	if err != nil || !start.Equal(now.Truncate(time.Minute).Add(-time.Minute)) {
		t.Fatalf("first period %v, %v", start, err)
	}
	c := closing{tenant: "acme", start: start, end: start.Add(time.Minute), node: "old", token: old}
	if err := l.close(ctx, c); err != nil {
		t.Fatal(err)
	}
	next, err := l.nextPeriod(ctx, "acme", time.Minute, now)
	if err != nil || !next.Equal(c.end) {
		t.Fatalf("next period %v, %v; want %v", next, err, c.end)
	}
	// The old leader decided to close the next period; a new leader is
	// elected (its fencer runs) before the old one writes.
	if err := l.fencer().Advance(ctx, cur); err != nil {
		t.Fatal(err)
	}
	late := closing{tenant: "acme", start: next, end: next.Add(time.Minute), node: "old", token: old}
	err = l.close(ctx, late)
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.Current != cur.Epoch {
		t.Fatalf("late close: %v, want a stale error at epoch %d", err, cur.Epoch)
	}
	late.node, late.token = "new", cur
	if err := l.close(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := l.close(ctx, late); !errors.Is(err, errAlreadyClosed) {
		t.Fatalf("second close of one period: %v, want errAlreadyClosed", err)
	}
	rows := closedRows(t, db, dialect, "ledger-test")
	if len(rows) != 2 || rows[0].closedBy != "old" || rows[1].closedBy != "new" || rows[1].start != rows[0].end {
		t.Fatalf("rows %+v", rows)
	}
}
