package bench_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/bench"
)

func TestMain(m *testing.M) {
	// leakcheck waits for the embedded members' peer connections to end on
	// their read timeout; the options name what stays behind for good.
	testsupport.VerifyTestMain(m,
		// etcd's embedded server and the gRPC/zap machinery leave these
		// behind after Close.
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/client/pkg/v3/logutil.(*MergeLogger).outputLoop"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/pkg/v3/traceutil.(*Trace).Log"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

// wantRows names, by a fragment of their section title, how many rows
// every section of a full run has (the Redis row is optional).
var wantSections = []struct {
	title string
	rows  int
}{
	{"Key -> owner lookup", 5},
	{"Fenced write vs plain put, 1 etcd member", 3},
	{"Fenced write vs plain put, 3 etcd members", 3},
	{"Group commit, 16 writers, 1 etcd member", 4},
	{"Group commit, 16 writers, 3 etcd members", 4},
	{"per-operation locks, 64 keys", 5},
	{"per-operation locks, 1 hot key", 5},
	{"Crash failover", 5},
	{"Planned handoff", 5},
	{"Rolling restart", 6},
	{"build time and memory", 4},
	{"Partitions moved", 4},
}

// TestQuick runs the whole bench in quick mode, end to end, and checks
// that the report has every section and row, each with a finite ratio. It
// asserts no timing.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd clusters, a fleet and redis-server: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var md bytes.Buffer
	rep, err := bench.Run(ctx, bench.Config{Quick: true}, &md)
	if err != nil {
		t.Fatal(err)
	}
	report := md.String()
	for _, want := range wantSections {
		found := false
		for _, s := range rep.Sections {
			if !strings.Contains(s.Title, want.title) {
				continue
			}
			found = true
			rows := len(s.Rows)
			if s.Key == "routed" && !hasRedis(s) {
				rows++ // skipped: no redis-server
			}
			if rows != want.rows {
				t.Errorf("%s: %d rows, want %d", s.Title, len(s.Rows), want.rows)
			}
			if !strings.Contains(report, s.Title) {
				t.Errorf("markdown lacks section %q", s.Title)
			}
		}
		if !found {
			t.Errorf("no section %q", want.title)
		}
	}
	for _, r := range rep.Rows() {
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0 {
			t.Errorf("%s: value %v", r.Name, r.Value)
		}
		if math.IsNaN(r.Ratio) || math.IsInf(r.Ratio, 0) {
			t.Errorf("%s: ratio %v", r.Name, r.Ratio)
		}
		if r.Ratio == 0 && !strings.Contains(r.Name, "failed") {
			t.Errorf("%s: ratio 0 (no reference)", r.Name)
		}
		if !strings.Contains(report, "| "+r.Name+" |") {
			t.Errorf("markdown lacks row %q", r.Name)
		}
	}
	for _, want := range []string{"buraksezer/consistent `LocateKey`", "groupcache-style ring", "bare xxhash", "concurrency.Mutex", "concurrency.Election", "client-go", "ceiling"} {
		if !strings.Contains(report, want) {
			t.Errorf("report has no row %q", want)
		}
	}
	var svg bytes.Buffer
	if err := bench.WriteSVG(&svg, rep); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg.Bytes(), []byte("<svg")) || !bytes.HasSuffix(bytes.TrimSpace(svg.Bytes()), []byte("</svg>")) {
		t.Error("not an SVG document")
	}
	t.Log("\n" + report)
}

// TestCommand runs two fast comparisons through the command line: stdout
// and -out carry the same report, -svg an SVG document.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd: not in -short")
	}
	dir := t.TempDir()
	out, svg := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.svg")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := bench.Command(ctx, []string{"-quick", "-only", "lookup,ring", "-out", out, "-svg", svg}, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(md, stdout.Bytes()) {
		t.Error("-out differs from stdout")
	}
	if !strings.HasPrefix(string(md), "`go run ./sim bench -quick -only lookup,ring") {
		t.Errorf("report does not start with its command: %.80q", md)
	}
	if !strings.Contains(stderr.String(), "lookup done") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<svg")) {
		t.Error("not an SVG document")
	}
	if err := bench.Command(ctx, []string{"-only", "nope"}, &stdout, &stderr); err == nil {
		t.Error("-only nope: no error")
	}
}

func hasRedis(s bench.Section) bool {
	for _, r := range s.Rows {
		if strings.HasPrefix(r.Name, "Redis") {
			return true
		}
	}
	return false
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []bench.Config{{Rounds: -1}, {Only: []string{"nope"}}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (bench.Config{Only: bench.Comparisons}).Validate(); err != nil {
		t.Error(err)
	}
}
