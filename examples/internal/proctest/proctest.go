// Package proctest runs an example's binary as OS processes in tests: build
// it once, start copies with JSON logs, signal them, read their logs, HTTP
// endpoints and metrics, and wait on what they log.
package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testsupport"
)

// Wait bounds every wait for an event in the process tests; reaching it
// fails the test, it never decides an outcome.
const Wait = 30 * time.Second

// Build builds the example in the current directory (its package) as
// name, with -race when the tests run with it (RaceEnabled), into a
// temporary directory removed when the test ends, and returns the binary's
// path.
func Build(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if RaceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// LogLine is one JSON log line of a process (hclog's JSON format):
// "@message", "@level", "@timestamp" and the line's own keys.
type LogLine map[string]any

// Msg returns the line's message.
func (l LogLine) Msg() string { s, _ := l["@message"].(string); return s }

// Str returns the value of key k as a string, "" if absent.
func (l LogLine) Str(k string) string {
	switch v := l[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Proc is one process of an example.
type Proc struct {
	ID  string
	Cmd *exec.Cmd

	mu     sync.Mutex
	lines  []LogLine
	raw    []string
	hook   func(LogLine) // called by the reader for every line, while set
	addr   string
	Exited chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's, once Exited is closed
}

// Start starts the binary bin with args and reads its JSON logs.
// The test's cleanup kills it if the test did not stop it.
func Start(t *testing.T, bin, id string, args ...string) *Proc {
	t.Helper()
	p := &Proc{ID: id, Exited: make(chan struct{})}
	p.Cmd = exec.Command(bin, append([]string{"--id", id, "--listen", "127.0.0.1:0", "--log-json"}, args...)...)
	p.Cmd.Stdout = io.Discard
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr)
	t.Cleanup(func() {
		select {
		case <-p.Exited:
		default:
			_ = p.Cmd.Process.Signal(syscall.SIGCONT)
			_ = p.Cmd.Process.Kill()
			<-p.Exited
		}
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- log of %s (%d lines)\n%s", p.ID, len(p.raw), strings.Join(p.raw, "\n"))
			p.mu.Unlock()
		}
	})
	WaitFor(t, "the HTTP address of "+id, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.addr != ""
	}, p)
	return p
}

func (p *Proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		var l LogLine
		if json.Unmarshal([]byte(raw), &l) != nil {
			l = LogLine{"@message": raw}
		}
		p.mu.Lock()
		p.raw = append(p.raw, raw)
		p.lines = append(p.lines, l)
		if strings.HasPrefix(l.Msg(), "serving HTTP") {
			p.addr = l.Str("addr")
		}
		hook := p.hook
		p.mu.Unlock()
		if hook != nil {
			hook(l)
		}
	}
	_, _ = io.Copy(io.Discard, r)
	p.err = p.Cmd.Wait()
	close(p.Exited)
}

// SetHook sets (or with nil, clears) the function called for each new line.
func (p *Proc) SetHook(h func(LogLine)) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// FindPrefix returns the lines whose message begins with prefix, in order.
func (p *Proc) FindPrefix(prefix string) []LogLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []LogLine
	for _, l := range p.lines {
		if strings.HasPrefix(l.Msg(), prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Find returns the lines with message msg that match, in order.
func (p *Proc) Find(msg string, match func(LogLine) bool) []LogLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []LogLine
	for _, l := range p.lines {
		if l.Msg() == msg && (match == nil || match(l)) {
			out = append(out, l)
		}
	}
	return out
}

// Signal sends sig to the process.
func (p *Proc) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.ID, err)
	}
}

// Get fetches path from the process's HTTP server.
func (p *Proc) Get(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Ready reports whether /readyz answers 200.
func (p *Proc) Ready() bool {
	code, _, err := p.Get("/readyz")
	return err == nil && code == http.StatusOK
}

// Metric returns the sum of the samples of the metric name on /metrics.
func (p *Proc) Metric(name string) (float64, error) {
	code, body, err := p.Get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: status %d", code)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("/metrics: no %s", name)
	}
	return sum, nil
}

// WaitFor polls cond until it holds, failing the test after wait or when
// one of the processes exits.
func WaitFor(t *testing.T, what string, cond func() bool, procs ...*Proc) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		for _, p := range procs {
			select {
			case <-p.Exited:
				t.Fatalf("waiting for %s: %s exited: %v", what, p.ID, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Wait, what)
		}
		<-tick.C
	}
}

// Stop sends SIGTERM and waits for the process to exit with status 0.
func (p *Proc) Stop(t *testing.T) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(Wait):
		t.Fatalf("%s still running %v after SIGTERM", p.ID, Wait)
	}
	if p.err != nil {
		t.Fatalf("%s exited after SIGTERM: %v", p.ID, p.err)
	}
}

// VerifyTestMain runs the tests and then fails the test binary if
// goroutines are still running after testsupport.Grace, as
// testsupport.VerifyTestMain does, waiting out the goroutines that read the
// logs of the processes the tests started.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := testsupport.WaitNoLeaks(testsupport.Grace); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running %v after the tests ended: %v\n", testsupport.Grace, err)
			code = 1
		}
	}
	os.Exit(code)
}
