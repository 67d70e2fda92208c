package doccheck

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A block is a code block of a document: a fenced block of a markdown
// file, or an indented block of a Go doc comment.
type block struct {
	file string // the document, relative to the module's root
	line int    // the line of the block's first line of code
	lang string // the markdown fence's language; "" for a doc comment's block
	code string // the code, without the fence or the comment's "//\t"

	decls     string // the declarations of its <!-- go: --> comment
	declsLine int    // the line of their first line
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// firstLine is the block's first line of code, trimmed.
func (b block) firstLine() string {
	first, _, _ := strings.Cut(b.code, "\n")
	return strings.TrimSpace(first)
}

// moduleRoot returns the directory of the module's go.mod: two levels above
// this package.
func moduleRoot(t testing.TB) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test's source")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return filepath.Clean(root)
}

// declsOpen starts the HTML comment that declares what the ```go block
// right below it uses; "-->" ends it.
const declsOpen = "<!-- go:"

// markdownBlocks returns the fenced code blocks of the markdown file rel
// (relative to root), each go block with the declarations of the
// <!-- go: ... --> comment that ends on the line right above its fence.
// A declarations comment that no go block follows is an error.
func markdownBlocks(root, rel string) ([]block, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var (
		out     []block
		cur     *block
		indent  string
		body    []string
		decls   []string
		declsAt int // line of the open comment; 0 outside one
		pending *block
	)
	for i, l := range lines {
		n := i + 1
		trimmed := strings.TrimSpace(l)
		switch {
		case cur != nil && trimmed == "```":
			cur.code = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, strings.TrimPrefix(l, indent))
		case declsAt != 0:
			d, end := strings.CutSuffix(strings.TrimRight(l, " \t"), "-->")
			decls = append(decls, d)
			if end {
				pending = &block{decls: strings.Join(decls, "\n") + "\n", declsLine: declsAt}
				declsAt = 0
			}
		case strings.HasPrefix(trimmed, declsOpen):
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: a %s comment follows the one of line %d without a go block between", rel, n, declsOpen, pending.declsLine)
			}
			rest := strings.TrimPrefix(trimmed, declsOpen)
			if d, end := strings.CutSuffix(rest, "-->"); end {
				pending = &block{decls: d + "\n", declsLine: n}
			} else {
				declsAt, decls = n, []string{rest}
			}
		case strings.HasPrefix(trimmed, "```"):
			cur = &block{file: rel, line: n + 1, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			indent = l[:strings.Index(l, "```")]
			body = nil
			if pending != nil {
				if cur.lang != "go" || pending.declsLine+strings.Count(pending.decls, "\n") != n {
					return nil, fmt.Errorf("%s:%d: the %s comment is not right above a go block", rel, pending.declsLine, declsOpen)
				}
				cur.decls, cur.declsLine = pending.decls, pending.declsLine
				pending = nil
			}
		}
	}
	switch {
	case cur != nil:
		return nil, fmt.Errorf("%s:%d: code block not closed", rel, cur.line-1)
	case declsAt != 0:
		return nil, fmt.Errorf("%s:%d: %s comment not closed", rel, declsAt, declsOpen)
	case pending != nil:
		return nil, fmt.Errorf("%s:%d: the %s comment is not followed by a go block", rel, pending.declsLine, declsOpen)
	}
	return out, nil
}

// docBlocksOf returns the indented code blocks of the package comment of
// the Go file rel (relative to root): runs of comment lines that start
// with "//\t" (gofmt writes a doc comment's code blocks so), blank comment
// lines between them included.
func docBlocksOf(root, rel string) ([]block, error) {
	path := filepath.Join(root, rel)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return nil, err
	}
	if f.Doc == nil {
		return nil, nil
	}
	var out []block
	var cur *block
	var blank []string // blank lines seen since the block's last line
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
		blank = nil
	}
	for _, c := range f.Doc.List {
		n := fset.Position(c.Slash).Line
		switch {
		case strings.HasPrefix(c.Text, "//\t"):
			if cur == nil {
				cur = &block{file: rel, line: n}
			}
			for _, b := range blank {
				cur.code += b
			}
			blank = nil
			cur.code += strings.TrimPrefix(c.Text, "//\t") + "\n"
		case c.Text == "//" && cur != nil:
			blank = append(blank, "\n")
		default:
			flush()
		}
	}
	flush()
	return out, nil
}

// docFiles returns the doc.go files of the module, relative to root,
// outside testdata and directories the go command ignores.
func docFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "doc.go" {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out, err
}

// readmes returns README.md and the examples' READMEs, relative to root.
func readmes(root string) ([]string, error) {
	found, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, f := range found {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}
