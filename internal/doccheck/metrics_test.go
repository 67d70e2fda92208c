package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// idLabels are labels whose values name instances (a member, a node, an
// election, a candidate): no document lists their values.
var idLabels = []string{"member", "node", "election", "candidate"}

// A family is what the registry holds of one metric: its type and, by
// label, the values its samples carry.
type family struct {
	typ    string
	values map[string][]string
}

func families(mfs []*dto.MetricFamily) map[string]family {
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{typ: strings.ToLower(mf.GetType().String()), values: map[string][]string{}}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(f.values[lp.GetName()], lp.GetValue()) {
					f.values[lp.GetName()] = append(f.values[lp.GetName()], lp.GetValue())
				}
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

// exampleMetrics returns the metrics the examples' READMEs name, by file.
func exampleMetrics(t *testing.T, root string) map[string][]metricRef {
	t.Helper()
	mds, err := readmes(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]metricRef{}
	for _, md := range mds[1:] {
		data, err := os.ReadFile(filepath.Join(root, md))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range metricRefs(string(data)) {
			if _, skip := notMetrics[r.name]; !skip {
				out[md] = append(out[md], r)
			}
		}
	}
	return out
}

// hasWord reports whether text names word: not as part of a longer word.
func hasWord(text, word string) bool {
	return regexp.MustCompile(`(^|[^a-z0-9_-])` + regexp.QuoteMeta(word) + `([^a-z0-9_-]|$)`).MatchString(text)
}

// Every metric README.md and the package comments name is registered by
// the component that claims it, with the labels they name, the type their
// tables give it and no label value they leave out; every metric
// registered is in the README's table, with every label it carries
// named there (or, for a label every metric of a component carries, in
// the paragraph above it).
func TestMetricsDocumented(t *testing.T) {
	root := moduleRoot(t)
	readmeRows, instance, prose, err := readmeMetrics(root)
	if err != nil {
		t.Fatal(err)
	}
	docRows, err := docTables(root)
	if err != nil {
		t.Fatal(err)
	}
	comments, err := commentMetrics(root)
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	rec := newRecorder(reg)
	var mfs []*dto.MetricFamily
	runComponents(t, rec, func() {
		if mfs, err = reg.Gather(); err != nil {
			t.Fatalf("gather: %v", err)
		}
	})
	registered := rec.registered(t)
	gathered := families(mfs)
	for name := range gathered {
		if _, ok := registered[name]; !ok {
			t.Errorf("%s was gathered but not registered through the recorder", name)
		}
	}

	// Every name a document gives is registered, with the labels it names.
	named := func(where string, r metricRef) {
		t.Helper()
		if r.prefix {
			for name := range registered {
				if strings.HasPrefix(name, r.name) {
					return
				}
			}
			t.Errorf("%s: %s* names no registered metric", where, r.name)
			return
		}
		labels, ok := registered[r.name]
		if !ok {
			t.Errorf("%s: %s is not a metric any component registers", where, r.name)
			return
		}
		for _, l := range r.labels {
			if !slices.Contains(labels, l) {
				t.Errorf("%s: %s has no label %q (its labels: %v)", where, r.name, l, labels)
			}
		}
	}
	for _, r := range prose {
		named("README.md", r)
	}
	for md, refs := range exampleMetrics(t, root) {
		for _, r := range refs {
			named(md, r)
		}
	}
	for where, refs := range comments {
		for _, r := range refs {
			named(where, r)
		}
	}
	for _, row := range append(slices.Clone(readmeRows), docRows...) {
		var types []string
		for _, r := range row.refs {
			named(row.where, r)
			f, ok := gathered[r.name]
			if !ok || r.prefix {
				continue
			}
			types = append(types, f.typ)
			if r.typ != "" && r.typ != f.typ {
				t.Errorf("%s: %s is a %s, not a %s", row.where, r.name, f.typ, r.typ)
			}
			// The values a named label takes are the ones the row lists.
			for _, l := range r.labels {
				if slices.Contains(idLabels, l) {
					continue
				}
				for _, v := range f.values[l] {
					if !hasWord(row.text, v) {
						t.Errorf("%s: %s{%s} takes the value %q, which the row does not name: %q", row.where, r.name, l, v, strings.TrimSpace(row.text))
					}
				}
			}
		}
		if row.refs[0].typ == "" && len(types) > 0 {
			slices.Sort(types)
			types = slices.Compact(types)
			want := slices.Compact(slices.Sorted(slices.Values(row.types)))
			if !slices.Equal(types, want) {
				t.Errorf("%s: the row's types are %v; its metrics are of types %v", row.where, row.types, types)
			}
		}
	}

	// Every metric registered is in the README's table, with its labels.
	inTable := map[string]metricRef{}
	for _, row := range readmeRows {
		for _, r := range row.refs {
			inTable[r.name] = r
		}
	}
	var names []string
	for name := range registered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasPrefix(name, "tenure_") {
			continue
		}
		r, ok := inTable[name]
		if !ok {
			t.Errorf("%s is registered but not in README.md's metric table", name)
			continue
		}
		for _, l := range registered[name] {
			if !slices.Contains(r.labels, l) && !slices.Contains(instance, l) {
				t.Errorf("README.md's metric table names %s without its label %q (nor does the paragraph above it, as %s=<...>)", name, l, l)
			}
		}
	}
	t.Logf("%d metrics registered, %d with samples; README.md names %d in its table", len(registered), len(gathered), len(inTable))
}
