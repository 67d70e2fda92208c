package doccheck

import (
	"fmt"
	"strings"
	"testing"
)

// imports maps the package names snippets may use to their import paths.
var imports = map[string]string{
	"context":     "context",
	"ed25519":     "crypto/ed25519",
	"errors":      "errors",
	"fmt":         "fmt",
	"http":        "net/http",
	"io":          "io",
	"log":         "log",
	"os":          "os",
	"sql":         "database/sql",
	"strings":     "strings",
	"time":        "time",
	"tls":         "crypto/tls",
	"x509":        "crypto/x509",
	"clientv3":    "go.etcd.io/etcd/client/v3",
	"credentials": "google.golang.org/grpc/credentials",
	"grpc":        "google.golang.org/grpc",
	"hclog":       "github.com/hashicorp/go-hclog",
	"insecure":    "google.golang.org/grpc/credentials/insecure",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
	"zap":         "go.uber.org/zap",
	"balance":     "github.com/tenure-go/tenure/ownership/balance",
	"counterpb":   "github.com/tenure-go/tenure/examples/grpccounter/counterpb",
	"election":    "github.com/tenure-go/tenure/election",
	"etcdfence":   "github.com/tenure-go/tenure/fence/etcdfence",
	"fence":       "github.com/tenure-go/tenure/fence",
	"fleet":       "github.com/tenure-go/tenure/ownership/fleet",
	"grpcroute":   "github.com/tenure-go/tenure/router/grpcroute",
	"httpfence":   "github.com/tenure-go/tenure/fence/httpfence",
	"ownership":   "github.com/tenure-go/tenure/ownership",
	"ring":        "github.com/tenure-go/tenure/ownership/ring",
	"router":      "github.com/tenure-go/tenure/router",
	"sqlfence":    "github.com/tenure-go/tenure/fence/sqlfence",
	"tenurepb":    "github.com/tenure-go/tenure/router/grpcroute/tenurepb",
}

// A docBlock says what the indented block of a doc.go package comment
// whose first line starts with first is: Go, compiled with decls
// declaring the names it uses (and, if separate, each paragraph in a
// scope of its own), or not Go (notGo says what it is). A block of a
// doc.go missing from this table is compiled with no declarations.
type docBlock struct {
	file, first string
	notGo       string
	decls       string
	separate    bool
}

var docBlocks = []docBlock{
	{file: "fence/httpfence/doc.go", first: "409 Conflict", notGo: "a table of HTTP statuses"},
	{file: "fence/sqlfence/doc.go", first: "CREATE TABLE tenure_fences", notGo: "SQL"},
	{file: "fence/sqlfence/doc.go", first: "INSERT INTO tenure_fences", notGo: "SQL"},
	{file: "fence/etcdfence/doc.go", first: "// Single-write form", notGo: "transactions in etcd's If/Then/Else notation"},
	{file: "fence/etcdfence/doc.go", first: "If(per scope:", notGo: "a transaction in etcd's If/Then notation"},
	{file: "sim/scale/doc.go", first: "go run ./sim scale", notGo: "shell commands"},
	{file: "ownership/doc.go", first: "step  event", notGo: "the order of events, a table"},
	{file: "ownership/doc.go", first: "name ", notGo: "the metric table (TestMetricsDocumented checks it)"},
	{file: "ownership/doc.go", first: "<prefix>claims/resize/<id>/record", notGo: "a resize's keys in etcd"},
	{file: "election/doc.go", first: "send time of the last acknowledged renewal", notGo: "a formula"},
	{file: "election/doc.go", first: "TTL - SafetyMargin", notGo: "a formula"},
	{file: "election/doc.go", first: `fence.Token{Scope: "leader/<name>"`, notGo: "a token's fields, in words"},
	{file: "election/doc.go", first: "name ", notGo: "the metric table (TestMetricsDocumented checks it)"},
	{
		file: "router/doc.go", first: "func (s *store) incr(",
		decls: "type store struct{ db interface{ Incr(context.Context, fence.Token, string) error } }\n",
	},
	{
		file: "router/grpcroute/doc.go", first: "c, err := grpcroute.NewClient(",
		decls: "var (\n\tctx context.Context\n\tetcd *clientv3.Client\n\tkeyOfRequest grpcroute.KeyFunc\n\tcreds credentials.TransportCredentials\n)\n",
	},
	{
		file: "router/grpcroute/doc.go", first: "// node", separate: true,
		decls: "var (\n\trs *grpcroute.Server\n\tc *grpcroute.Client\n\tnodeCert, clientCert tls.Certificate\n\tcaPool *x509.CertPool\n)\n",
	},
}

// goSnippets returns every Go block of the READMEs and the doc.go package
// comments, with its declarations, and fails t for a block of a doc.go
// that docBlocks names and that is not there.
func goSnippets(t *testing.T, root string) []snippet {
	t.Helper()
	var out []snippet
	mds, err := readmes(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range mds {
		bs, err := markdownBlocks(root, md)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.lang == "go" {
				out = append(out, snippet{b: b})
			}
		}
	}
	docs, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	used := make([]bool, len(docBlocks))
	for _, doc := range docs {
		bs, err := docBlocksOf(root, doc)
		if err != nil {
			t.Fatal(err)
		}
	blocks:
		for _, b := range bs {
			for i, d := range docBlocks {
				if d.file == doc && strings.HasPrefix(b.firstLine(), d.first) && !used[i] {
					used[i] = true
					if d.notGo == "" {
						b.decls = d.decls
						out = append(out, snippet{b: b, separate: d.separate})
					}
					continue blocks
				}
			}
			out = append(out, snippet{b: b})
		}
	}
	for i, d := range docBlocks {
		if !used[i] {
			t.Errorf("docBlocks names a block of %s starting %q that is not there: update the table", d.file, d.first)
		}
	}
	return out
}

// Every Go block of the READMEs and the package comments compiles.
func TestSnippetsCompile(t *testing.T) {
	root := moduleRoot(t)
	snippets := goSnippets(t, root)
	if len(snippets) == 0 {
		t.Fatal("no Go block found")
	}
	for _, s := range snippets {
		t.Logf("%v: %s", s.b, s.b.firstLine())
	}
	if out, err := buildSnippets(t, root, snippets); err != nil {
		t.Fatalf("a snippet does not compile (%v):\n%s\nThe names a README block uses but does not declare go in the <!-- go: --> comment above it; a doc.go block's in docBlocks (snippets_test.go).", err, out)
	}
}

// A block that stops compiling fails the build, and the compiler's error
// names the document's line: README.md's first Go block with its call
// of ownership.Join misspelt.
func TestBrokenSnippetFails(t *testing.T) {
	root := moduleRoot(t)
	bs, err := markdownBlocks(root, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		i := strings.Index(b.code, "ownership.Join(")
		if b.lang != "go" || i < 0 {
			continue
		}
		want := fmt.Sprintf("README.md:%d:", b.line+strings.Count(b.code[:i], "\n"))
		b.code = strings.Replace(b.code, "ownership.Join(", "ownership.Joins(", 1)
		out, err := buildSnippets(t, root, []snippet{{b: b}})
		if err == nil {
			t.Fatalf("a misspelt call compiled:\n%s", b.code)
		}
		if !strings.Contains(out, want) || !strings.Contains(out, "Joins") {
			t.Fatalf("the error does not name %s and the misspelt name:\n%s", want, out)
		}
		return
	}
	t.Fatal("README.md has no Go block calling ownership.Join")
}
