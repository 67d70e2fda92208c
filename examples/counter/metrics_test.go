package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestMetricsDocumented checks README.md against the counter's registry,
// its database pool watched as the counter watches it: every counter_*
// metric the README names is registered, and every one registered is
// named in the README; every go_sql_* metric (the pool's) it names is
// registered. (internal/doccheck checks the tenure_* metrics.)
func TestMetricsDocumented(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, n := range regexp.MustCompile(`\b(counter|go_sql)_[a-z0-9_]+`).FindAllString(string(readme), -1) {
		if n != counterdb.IncrementsTable { // a table
			named[n] = true
		}
	}
	_, db, _ := counterdbtest.DB(t, sqlfence.SQLite)
	m := counterdb.NewMetrics()
	if err := m.WatchPool(db); err != nil {
		t.Fatal(err)
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, f := range mfs {
		if strings.HasPrefix(f.GetName(), "counter_") || strings.HasPrefix(f.GetName(), "go_sql_") {
			registered[f.GetName()] = true
		}
	}
	for n := range named {
		if !registered[n] {
			t.Errorf("README.md names %s, which the counter does not register", n)
		}
	}
	for n := range registered {
		if !named[n] && strings.HasPrefix(n, "counter_") {
			t.Errorf("the counter registers %s, which README.md does not name", n)
		}
	}
	if len(registered) == 0 {
		t.Error("the counter registers no counter_* metric")
	}
}
