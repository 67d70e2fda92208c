package main

import (
	"strings"
	"testing"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // substring; empty: valid
	}{
		{args: nil},
		{args: []string{"--id", "a", "--partitions", "64", "--group-commit=false", "--db", "postgres://u@h/db"}},
		{args: []string{"--embedded-etcd", "/tmp/x", "--etcd", ""}},
		{args: []string{"--etcd", ""}, err: "--etcd or --embedded-etcd"},
		{args: []string{"--id", "a/b"}, err: "--id"},
		{args: []string{"--partitions", "-1"}, err: "--partitions"},
		{args: []string{"--partitions", "100"}, err: "power of two"},
		{args: []string{"--ttl", "1s"}, err: "--ttl"},
		{args: []string{"--max-batch", "0"}, err: "--max-batch"},
		{args: []string{"--hold", "-1s"}, err: "--hold"},
		{args: []string{"--cluster", "a/b"}, err: "--cluster"},
		{args: []string{"--log-level", "loud"}, err: "--log-level"},
		{args: []string{"extra"}, err: "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one about %s", tc.args, err, tc.err)
		}
	}
	if _, _, err := counterdb.Open("mysql://x", 0); err == nil {
		t.Error("openDB accepted mysql://")
	}
	if _, _, err := counterdb.Open("sqlite:", 0); err == nil {
		t.Error("openDB accepted an empty SQLite path")
	}
}
