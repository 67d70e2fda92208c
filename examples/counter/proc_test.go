package main

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
)

// wait bounds every wait for an event in the process tests; reaching it
// fails the test, it never decides an outcome.
const wait = 30 * time.Second

// binDir holds the binary that buildBinary builds once per test process;
// TestMain removes it.
var binDir string

var build = sync.OnceValues(func() (string, error) {
	var err error
	binDir, err = os.MkdirTemp("", "counter-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "counter")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// buildBinary builds the counter (with -race when the test runs with
// it), once per test process, and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// logLine is one JSON log line of a counter (hclog's JSON format):
// "@message", "@level", "@timestamp" and the line's own keys.
type logLine map[string]any

func (l logLine) msg() string { s, _ := l["@message"].(string); return s }

func (l logLine) str(k string) string {
	switch v := l[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// proc is one counter process.
type proc struct {
	id  string
	cmd *exec.Cmd

	mu     sync.Mutex
	lines  []logLine
	raw    []string
	hook   func(logLine) // called by the reader for every line, while set
	addr   string
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startProc starts the counter binary with args and reads its JSON logs.
// The test's cleanup kills it if the test did not stop it.
func startProc(t *testing.T, bin, id string, args ...string) *proc {
	t.Helper()
	p := &proc{id: id, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--id", id, "--listen", "127.0.0.1:0", "--log-json"}, args...)...)
	p.cmd.Stdout = io.Discard
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr)
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- log of %s (%d lines)\n%s", p.id, len(p.raw), strings.Join(p.raw, "\n"))
			p.mu.Unlock()
		}
	})
	waitFor(t, "the HTTP address of "+id, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.addr != ""
	}, p)
	return p
}

func (p *proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		var l logLine
		if json.Unmarshal([]byte(raw), &l) != nil {
			l = logLine{"@message": raw}
		}
		p.mu.Lock()
		p.raw = append(p.raw, raw)
		p.lines = append(p.lines, l)
		if strings.HasPrefix(l.msg(), "serving HTTP") {
			p.addr = l.str("addr")
		}
		hook := p.hook
		p.mu.Unlock()
		if hook != nil {
			hook(l)
		}
	}
	_, _ = io.Copy(io.Discard, r)
	p.err = p.cmd.Wait()
	close(p.exited)
}

// setHook sets (or with nil, clears) the function called for each new line.
func (p *proc) setHook(h func(logLine)) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// find returns the lines with message msg that match, in order.
func (p *proc) find(msg string, match func(logLine) bool) []logLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []logLine
	for _, l := range p.lines {
		if l.msg() == msg && (match == nil || match(l)) {
			out = append(out, l)
		}
	}
	return out
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.id, err)
	}
}

// get fetches path from the process's HTTP server.
func (p *proc) get(path string) (int, string, error) {
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

func (p *proc) ready() bool {
	code, _, err := p.get("/readyz")
	return err == nil && code == http.StatusOK
}

// metric returns the sum of the samples of the metric name on /metrics.
func (p *proc) metric(name string) (float64, error) {
	code, body, err := p.get("/metrics")
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

// waitFor polls cond until it holds, failing the test after wait or when
// one of the processes exits.
func waitFor(t *testing.T, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		for _, p := range procs {
			select {
			case <-p.exited:
				t.Fatalf("waiting for %s: %s exited: %v", what, p.id, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", wait, what)
		}
		<-tick.C
	}
}

// stop sends SIGTERM and waits for the process to exit with status 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(wait):
		t.Fatalf("%s still running %v after SIGTERM", p.id, wait)
	}
	if p.err != nil {
		t.Fatalf("%s exited after SIGTERM: %v", p.id, p.err)
	}
}
