package main

import "testing"

// TestParseFlags checks the flags of the store: the etcd store without
// --db, and the SQL store's limits with it.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--id", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if c.db != "" || !c.groupCommit || !c.prepare || c.maxBatch != 256 {
		t.Errorf("defaults: db %q, group commit %v, prepare %v, max batch %d; want the etcd store, true, true, 256", c.db, c.groupCommit, c.prepare, c.maxBatch)
	}
	if _, err := parseFlags([]string{"--id", "a", "--partitions", "48"}); err != nil {
		t.Errorf("--partitions 48 with the etcd store: %v", err)
	}
	for _, args := range [][]string{
		{"--id", "a", "--db", "sqlite:x.db", "--partitions", "48"}, // the SQL store's slots need a power of two
		{"--id", "a", "--max-batch", "0"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}
