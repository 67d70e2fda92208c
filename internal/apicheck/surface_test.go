package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The surface budget of the core (every package under roots but internal
// and generated ones): how many names it exports in all, and at most per
// package. A name is an exported func, a method of an exported type, an
// exported type, const or var, in a non-test, non-generated file. A new
// name that pushes past the budget must replace one that says the same
// thing.
const (
	coreBudget    = 500
	packageBudget = 70
)

// TestSurfaceBudget counts the exported names of each core package and
// holds them to the budget; -v prints the counts.
func TestSurfaceBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(out))
	counts := map[string]int{}
	for _, r := range roots {
		err := filepath.WalkDir(filepath.Join(root, r), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				internal("/"+filepath.ToSlash(rel)) || generated(filepath.ToSlash(rel)) {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			counts[filepath.ToSlash(rel)] += exported(f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, pkg := range slices.Sorted(maps.Keys(counts)) {
		n := counts[pkg]
		total += n
		t.Logf("%4d %s", n, pkg)
		if n > packageBudget {
			t.Errorf("%s exports %d names, over the budget of %d per package", pkg, n, packageBudget)
		}
	}
	t.Logf("%4d core, in %d packages", total, len(counts))
	if len(counts) < corePackages {
		t.Fatalf("counted %d packages, want at least %d", len(counts), corePackages)
	}
	if total > coreBudget {
		t.Errorf("the core exports %d names, over the budget of %d", total, coreBudget)
	}
}

// exported returns how many names f exports: funcs, methods of exported
// types, types, consts and vars.
func exported(f *ast.File) int {
	n := 0
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv.List[0].Type)) {
				n++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(t ast.Expr) bool {
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
