package doccheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A metricRef is a metric a document names: `tenure_x`, `tenure_x{a,b}`
// (naming its labels a and b; `{a="v|w"}` names a with values), or
// `tenure_x_*` (the metrics of that prefix).
type metricRef struct {
	name     string
	labels   []string // the labels it names
	braces   bool     // whether it names labels (perhaps none: {})
	prefix   bool
	typ      string // the type a doc.go table gives it; "" elsewhere
	tableRow bool   // whether it is named in a table
}

var (
	metricRE    = regexp.MustCompile(`\btenure_[a-z0-9_]*(\*|\{[^}]*\})?`)
	labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*`)
)

// metricRefs returns the metrics text names. Templates such as
// tenure_<subsystem>_... are not names.
func metricRefs(text string) []metricRef {
	var out []metricRef
	for _, m := range metricRE.FindAllString(text, -1) {
		name, rest, braces := strings.Cut(m, "{")
		r := metricRef{name: strings.TrimSuffix(name, "*"), prefix: strings.HasSuffix(m, "*"), braces: braces}
		if !r.prefix && strings.HasSuffix(r.name, "_") {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			// a label, or a matcher of PromQL: a="v", a!="v", a=~"v", a!~"v"
			if l = labelNameRE.FindString(strings.TrimSpace(l)); l != "" {
				r.labels = append(r.labels, l)
			}
		}
		out = append(out, r)
	}
	return out
}

// A metricRow is a row of a metric table: the metrics it names, the types
// its type column gives them (singular; any order), and what it says.
type metricRow struct {
	where string
	refs  []metricRef
	types []string
	text  string
}

// readmeMetrics returns the rows of README.md's metric table, the labels
// its Metrics paragraph says a component adds to all its metrics
// (written label=<...>), and the metrics the rest of the README names.
func readmeMetrics(root string) (rows []metricRow, instance []string, prose []metricRef, err error) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, nil, nil, err
	}
	lines := strings.Split(string(data), "\n")
	table, para := -1, -1
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "| metric | type |"):
			table = i
		case strings.HasPrefix(l, "**Metrics.**"):
			para = i
		}
	}
	if table < 0 || para < 0 || para > table {
		return nil, nil, nil, fmt.Errorf("README.md: no **Metrics.** paragraph followed by a | metric | type | table")
	}
	for _, l := range lines[para:table] {
		for _, m := range regexp.MustCompile(`\b([a-z_]+)=<`).FindAllStringSubmatch(l, -1) {
			instance = append(instance, m[1])
		}
	}
	end := table + 2
	for ; end < len(lines) && strings.HasPrefix(lines[end], "|"); end++ {
		cells := strings.Split(strings.Trim(lines[end], "|"), "|")
		if len(cells) != 3 {
			return nil, nil, nil, fmt.Errorf("README.md:%d: a metric row has %d cells, want 3", end+1, len(cells))
		}
		row := metricRow{where: fmt.Sprintf("README.md:%d", end+1), refs: metricRefs(cells[0]), text: cells[2]}
		for _, typ := range strings.Split(cells[1], ",") {
			row.types = append(row.types, strings.TrimSuffix(strings.TrimSpace(typ), "s"))
		}
		for i := range row.refs {
			row.refs[i].tableRow = true
		}
		rows = append(rows, row)
	}
	rest := strings.Join(lines[:table], "\n") + "\n" + strings.Join(lines[end:], "\n")
	return rows, instance, metricRefs(rest), nil
}

// docTables returns the rows of the metric tables of the doc.go package
// comments: indented blocks whose header is "name type labels meaning",
// each row one metric with its type and labels, or a prefix with a
// pointer to another table.
func docTables(root string) ([]metricRow, error) {
	docs, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	var out []metricRow
	for _, doc := range docs {
		bs, err := docBlocksOf(root, doc)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			lines := strings.Split(strings.TrimSuffix(b.code, "\n"), "\n")
			head := lines[0]
			if f := strings.Fields(head); len(f) != 4 || f[0] != "name" || f[1] != "type" || f[2] != "labels" || f[3] != "meaning" {
				continue
			}
			typeAt, labelsAt, meaningAt := strings.Index(head, "type"), strings.Index(head, "labels"), strings.Index(head, "meaning")
			for i, l := range lines[1:] {
				row := metricRow{where: fmt.Sprintf("%s:%d", doc, b.line+1+i)}
				name, _, _ := strings.Cut(l, " ")
				ref := metricRef{name: strings.TrimSuffix(name, "*"), prefix: strings.HasSuffix(name, "*"), tableRow: true}
				if !ref.prefix {
					if len(l) < meaningAt {
						return nil, fmt.Errorf("%s: a row shorter than the table's header", row.where)
					}
					ref.typ = strings.TrimSpace(l[typeAt:labelsAt])
					ref.braces = true
					for _, lb := range strings.Split(l[labelsAt:meaningAt], ",") {
						if lb = strings.TrimSpace(lb); lb != "" {
							ref.labels = append(ref.labels, lb)
						}
					}
					row.types = []string{ref.typ}
					row.text = l[meaningAt:]
				}
				row.refs = []metricRef{ref}
				out = append(out, row)
			}
		}
	}
	return out, nil
}

// notMetrics are the tenure_ names of the comments that are not metrics.
var notMetrics = map[string]string{
	"tenure_fences": "sqlfence's default table",
	"tenure_fence":  "sqlfence's Guard relation",
}

// commentMetrics returns, by file and line, the metrics that the comments
// of the library's Go files (not tests, not sim or examples, not generated)
// name.
func commentMetrics(root string) (map[string][]metricRef, error) {
	out := map[string][]metricRef{}
	err := libraryFiles(root, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, g := range f.Comments {
			for _, c := range g.List {
				for _, r := range metricRefs(c.Text) {
					if _, skip := notMetrics[r.name]; !skip {
						where := fmt.Sprintf("%s:%d", rel, fset.Position(c.Slash).Line)
						out[where] = append(out[where], r)
					}
				}
			}
		}
	})
	return out, err
}
