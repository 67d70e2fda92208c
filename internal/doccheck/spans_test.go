package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// spanRE matches the names of spans and span attributes that a text
// names: tenure.move.out, tenure.partition (tenure.v1.Refusal, a proto
// name, is neither).
var spanRE = regexp.MustCompile(`\btenure(?:\.[a-z][a-z_]*)+\b`)

// tracingNames is what the program declares for its spans: each span
// name by where it is declared (one home: a const whose name begins
// with "span", whose value is the name), and the attribute keys
// (consts of attribute.Key("tenure...")).
type tracingNames struct {
	spans map[string][]string
	attrs map[string]bool
}

// libraryFiles calls fn with every Go file of the library (not tests,
// not sim or examples, not generated), parsed with its comments.
func libraryFiles(root string, fn func(rel string, fset *token.FileSet, f *ast.File)) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel == "sim" || rel == "examples" || rel == "internal/doccheck" || name == "testdata" || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(rel, fset, f)
		return nil
	})
}

// programTracing returns the span names and attribute keys the library
// declares.
func programTracing(root string) (tracingNames, error) {
	out := tracingNames{spans: map[string][]string{}, attrs: map[string]bool{}}
	err := libraryFiles(root, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						if s, err := strconv.Unquote(v.Value); err == nil && v.Kind == token.STRING && strings.HasPrefix(id.Name, "span") {
							out.spans[s] = append(out.spans[s], rel+":"+strconv.Itoa(fset.Position(id.Pos()).Line))
						}
					case *ast.CallExpr:
						sel, ok := v.Fun.(*ast.SelectorExpr)
						if !ok || sel.Sel.Name != "Key" || len(v.Args) != 1 {
							continue
						}
						if lit, ok := v.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if s, err := strconv.Unquote(lit.Value); err == nil {
								out.attrs[s] = true
							}
						}
					}
				}
			}
		}
	})
	return out, err
}

// tracingRefs returns, by place, the span names and attribute keys that
// the READMEs, the doc.go files and the comments of the library's
// trace.go files (each package's tracing table) name.
func tracingRefs(root string) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(where, text string) {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range spanRE.FindAllString(line, -1) {
				w := where + ":" + strconv.Itoa(i+1)
				out[w] = append(out[w], m)
			}
		}
	}
	files, err := readmes(root)
	if err != nil {
		return nil, err
	}
	docs, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	for _, f := range append(files, docs...) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		add(f, string(data))
	}
	err = libraryFiles(root, func(rel string, fset *token.FileSet, f *ast.File) {
		if filepath.Base(rel) != "trace.go" {
			return // the tables of spans live beside the code (a package's trace.go); elsewhere tenure.x is Go (tenure.enter)
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				for _, m := range spanRE.FindAllString(c.Text, -1) {
					w := rel + ":" + strconv.Itoa(fset.Position(c.Slash).Line)
					out[w] = append(out[w], m)
				}
			}
		}
	})
	return out, err
}

// TestSpansDocumented: every span name and span attribute that the docs
// (README.md, the examples' READMEs, the doc.go files, the tracing tables
// of the packages' trace.go) name is one the program declares; each span name is declared
// in one place; and README.md names every span the program opens.
func TestSpansDocumented(t *testing.T) {
	root := moduleRoot(t)
	prog, err := programTracing(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.spans) == 0 {
		t.Fatal("the program declares no span names: the check sees nothing")
	}
	for name, where := range prog.spans {
		if len(where) > 1 {
			t.Errorf("span %s is declared in %d places (%s): one home", name, len(where), strings.Join(where, ", "))
		}
	}
	refs, err := tracingRefs(root)
	if err != nil {
		t.Fatal(err)
	}
	for where, names := range refs {
		for _, n := range names {
			if _, ok := prog.spans[n]; !ok && !prog.attrs[n] {
				t.Errorf("%s names %s, which is no span name or span attribute of the program", where, n)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := spanRE.FindAllString(string(readme), -1)
	for name, where := range prog.spans {
		if !slices.Contains(named, name) {
			t.Errorf("span %s (%s) is not in README.md", name, where[0])
		}
	}
}
