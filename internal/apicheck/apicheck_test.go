package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// roots are the directories, relative to the module's root, whose
// packages (and their subpackages) make up the public API.
var roots = []string{"fence", "election", "ownership", "router"}

// corePackages is how many packages the roots hold: fence and its three
// forms, election, ownership with ring, fleet and balance, router with
// grpcroute.
const corePackages = 11

// generated marks the packages whose API a generator writes.
func generated(path string) bool { return strings.HasSuffix(path, "/tenurepb") }

// internal reports whether path is the import path of an internal package.
func internal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	DepOnly    bool
}

// TestPublicAPIOwnsItsTypes fails for every exported identifier of a core
// package that is an alias of another tenure package's type (internal, or
// public: one idea, one public name), whose value is another tenure
// package's variable or constant, or whose type, signature, exported
// fields or exported methods name a type (or an alias) of an internal
// package.
func TestPublicAPIOwnsItsTypes(t *testing.T) {
	pkgs := list(t)
	fset := token.NewFileSet()
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	n := 0
	for _, p := range pkgs {
		if p.DepOnly || internal(p.ImportPath) || generated(p.ImportPath) {
			continue
		}
		n++
		tp, err := imp.Import(p.ImportPath)
		if err != nil {
			t.Fatalf("import %s: %v", p.ImportPath, err)
		}
		for _, problem := range append(checkTypes(tp), checkValues(t, fset, p)...) {
			t.Error(problem)
		}
	}
	if n < corePackages {
		t.Fatalf("checked %d packages, want at least %d", n, corePackages)
	}
}

// list returns the core packages and their dependencies, with export data.
func list(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(out))
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,DepOnly"}
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(root, r)); err == nil {
			args = append(args, "./"+r+"/...")
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// checkTypes returns the problems of the exported objects of pkg, as its
// export data describes them.
func checkTypes(pkg *types.Package) []string {
	var problems []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Path() + "." + name
		w := walker{where: where}
		switch obj := obj.(type) {
		case *types.TypeName:
			if a, ok := obj.Type().(*types.Alias); ok && obj.IsAlias() {
				if target := aliasTarget(a); target != "" {
					problems = append(problems, fmt.Sprintf("%s is an alias of %s", where, target))
					continue
				}
			}
			w.underlying(obj.Type())
			if named, ok := obj.Type().(*types.Named); ok {
				for m := range named.Methods() {
					if m.Exported() {
						w.where = where + "." + m.Name()
						w.typ(m.Type())
					}
				}
			}
		default:
			w.typ(obj.Type())
		}
		problems = append(problems, w.problems...)
	}
	return problems
}

// aliasTarget returns the qualified name of the type alias a stands for,
// if it names a type of another tenure package, else "".
func aliasTarget(a *types.Alias) string {
	var obj *types.TypeName
	switch r := a.Rhs().(type) {
	case *types.Alias:
		obj = r.Obj()
	case *types.Named:
		obj = r.Obj()
	}
	if obj == nil || obj.Pkg() == nil || obj.Pkg() == a.Obj().Pkg() || !strings.HasPrefix(obj.Pkg().Path(), module(a.Obj().Pkg().Path())) {
		return ""
	}
	return obj.Pkg().Path() + "." + obj.Name()
}

// module returns the module path of a tenure import path.
func module(path string) string {
	const m = "github.com/tenure-go/tenure"
	if strings.HasPrefix(path, m) {
		return m
	}
	return path
}

// walker collects the internal types a type expression names. It enters
// no named type, so it needs no guard against cycles.
type walker struct {
	where    string
	problems []string
}

func (w *walker) report(obj *types.TypeName) {
	if obj.Pkg() != nil && internal(obj.Pkg().Path()) {
		w.problems = append(w.problems, fmt.Sprintf("%s names %s.%s", w.where, obj.Pkg().Path(), obj.Name()))
	}
}

// member walks the type of a field or method, named in the problems.
func (w *walker) member(name string, t types.Type) {
	where := w.where
	w.where += "." + name
	w.typ(t)
	w.where = where
}

// typ walks a type as a reference: named types are reported, not entered.
func (w *walker) typ(t types.Type) {
	if t == nil {
		return
	}
	switch t := t.(type) {
	case *types.Alias:
		w.report(t.Obj())
		for a := range t.TypeArgs().Types() {
			w.typ(a)
		}
		if t.Obj().Pkg() == nil || !internal(t.Obj().Pkg().Path()) {
			w.typ(t.Rhs())
		}
	case *types.Named:
		w.report(t.Obj())
		for a := range t.TypeArgs().Types() {
			w.typ(a)
		}
	default:
		w.underlying(t)
	}
}

// underlying walks the structure of a type: its exported fields and
// methods, elements, parameters and results.
func (w *walker) underlying(t types.Type) {
	if n, ok := t.(*types.Named); ok {
		t = n.Underlying()
	}
	switch t := t.(type) {
	case *types.Pointer:
		w.typ(t.Elem())
	case *types.Slice:
		w.typ(t.Elem())
	case *types.Array:
		w.typ(t.Elem())
	case *types.Map:
		w.typ(t.Key())
		w.typ(t.Elem())
	case *types.Chan:
		w.typ(t.Elem())
	case *types.Signature:
		for v := range t.Params().Variables() {
			w.typ(v.Type())
		}
		for v := range t.Results().Variables() {
			w.typ(v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() {
				w.member(f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			if m.Exported() {
				w.member(m.Name(), m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			w.typ(e)
		}
	}
}

// checkValues returns the exported variables and constants of p whose
// value is an identifier of another tenure package (a re-exported
// sentinel or constant: an internal one has no public name, a public one
// has its own), which export data does not show.
func checkValues(t *testing.T, fset *token.FileSet, p listed) []string {
	t.Helper()
	var problems []string
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		imports := map[string]string{} // local name -> path
		for _, s := range f.Imports {
			path, _ := strconv.Unquote(s.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if s.Name != nil {
				local = s.Name.Name
			}
			imports[local] = path
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.VAR && g.Tok != token.CONST) {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					sel, ok := ast.Unparen(vs.Values[i]).(*ast.SelectorExpr)
					if !ok {
						continue
					}
					if x, ok := sel.X.(*ast.Ident); ok && strings.HasPrefix(imports[x.Name], module(p.ImportPath)+"/") {
						problems = append(problems, fmt.Sprintf("%s.%s (%s) is %s.%s",
							p.ImportPath, id.Name, fset.Position(id.Pos()), imports[x.Name], sel.Sel.Name))
					}
				}
			}
		}
	}
	slices.Sort(problems)
	return problems
}
