//go:build unix

package ownership

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/sim/cluster"
)

// child is a node running in its own process (runChild).
type child struct {
	id   string
	proc *childproc.Process

	mu    sync.Mutex
	addr  string
	lines []map[string]any
	raw   []string
	more  chan struct{} // closed and replaced on every line
}

// startChild starts this test binary as node id of cluster, and waits
// until it listens.
func startChild(t *testing.T, endpoints []string, cluster, id string, partitions int) *child {
	t.Helper()
	c := &child{id: id, more: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+id, childEndpointsEnv+"="+strings.Join(endpoints, ","),
		childClusterEnv+"="+cluster, childPartitionsEnv+"="+strconv.Itoa(partitions))
	cmd.Stdout = &childproc.LineWriter{Line: func(b []byte) {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "addr" {
			c.add(nil, "", f[1])
		}
	}}
	cmd.Stderr = &childproc.LineWriter{Line: func(b []byte) {
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			m = map[string]any{"@message": string(b)}
		}
		c.add(m, string(b), "")
	}}
	p, err := childproc.Start(cmd, nil)
	require.NoError(t, err)
	c.proc = p
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGCONT)
		p.Term(15 * time.Second)
		if t.Failed() {
			c.mu.Lock()
			t.Logf("--- log of %s\n%s", id, strings.Join(c.raw, "\n"))
			c.mu.Unlock()
		}
	})
	c.wait(t, "its address", func() error {
		if c.addr == "" {
			return errors.New("no address yet")
		}
		return nil
	})
	return c
}

func (c *child) add(line map[string]any, raw, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if line != nil {
		c.lines = append(c.lines, line)
		c.raw = append(c.raw, raw)
	}
	if addr != "" {
		c.addr = addr
	}
	close(c.more)
	c.more = make(chan struct{})
}

// wait waits until cond, evaluated under the child's lock on every line it
// writes and every 50ms, returns nil.
func (c *child) wait(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		err := cond()
		more := c.more
		c.mu.Unlock()
		if err == nil {
			return
		}
		select {
		case <-more:
		case <-time.After(50 * time.Millisecond): // for conditions on HTTP answers
		case <-c.proc.Exited():
			t.Fatalf("%s exited waiting for %s: %v", c.id, what, c.proc.Err())
		case <-deadline.C:
			t.Fatalf("%s: waiting for %s: %v", c.id, what, err)
		}
	}
}

// log returns a copy of the child's log lines.
func (c *child) log() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.lines...)
}

// ready reports whether the child answers /readyz with 200.
func (c *child) ready() error {
	resp, err := http.Get("http://" + c.addr + "/healthz/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// metrics returns the child's metrics (flatMetrics).
func (c *child) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.addr + "/metrics.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]float64
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

// metric returns the child's metric name with the given labels (node
// added), 0 if it has none.
func (c *child) metric(t *testing.T, m map[string]float64, name string, labels ...string) float64 {
	t.Helper()
	ls := []string{fmt.Sprintf("%s=%q", labelNode, c.id)}
	if len(labels) == 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", labels[0], labels[1]))
	}
	slices.Sort(ls)
	key := name + "{" + strings.Join(ls, ",") + "}"
	return m[key]
}

// servedErr returns nil once every partition is served by its ring owner
// among members, as node b sees it.
func servedErr(b *Node, members ...string) error {
	ring := b.Ring()
	if got := ring.Members(); !slicesEqual(got, members) {
		return fmt.Errorf("members %v, want %v", got, members)
	}
	for p := range ring.Partitions() {
		owner, _ := ring.Owner(p)
		r := b.LookupPartition(p)
		if r.Owner != owner || r.Epoch == 0 || (owner == b.ID()) != r.Local {
			return fmt.Errorf("partition %d: ring owner %s, route %+v", p, owner, r)
		}
	}
	return nil
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// A node stopped (SIGSTOP) for three times its TTL and resumed (SIGCONT)
// has lost its session: etcd expired its lease, and with it its member key
// and its claims, which it sees deleted on its watch on waking, perhaps
// before its own timers fire. That is one event, told once: the loss is
// counted once, under "expired"; no forced release is counted or logged;
// one line names every partition lost; and the node serves again.
func TestPauseIsOneSessionLoss(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, ttl = 24, 2 * time.Second
	const name = "pause"
	w := startChild(t, c.Endpoints(), name, "w", P)
	b := join(t, cli, testConfig(t, name, "b", P))
	require.NoError(t, waitFor(30*time.Second, func() error { return servedErr(b, "b", "w") }, b))
	w.wait(t, "w ready", func() error { return w.ready() })
	var held []int
	for p := range P {
		if b.LookupPartition(p).Owner == "w" {
			held = append(held, p)
		}
	}
	require.NotEmpty(t, held)

	require.NoError(t, w.proc.Stop())
	stopped := time.Now()
	// etcd expires w's Lease: b serves everything.
	require.NoError(t, waitFor(30*time.Second, func() error { return servedErr(b, "b") }, b))
	time.Sleep(time.Until(stopped.Add(3 * ttl))) // the pause lasts 3 TTLs
	require.NoError(t, w.proc.Signal(syscall.SIGCONT))

	require.NoError(t, waitFor(30*time.Second, func() error { return servedErr(b, "b", "w") }, b))
	w.wait(t, "w ready again", func() error { return w.ready() })
	m := w.metrics(t)
	require.Contains(t, m, fmt.Sprintf("tenure_forced_releases_total{%s=%q}", labelNode, "w"))
	assert.Equal(t, 0.0, w.metric(t, m, "tenure_forced_releases_total"), "a pause is no forced release")
	for cause, want := range map[string]float64{"expired": 1, "revoked": 0, "deleted": 0, "closed": 0, "other": 0} {
		assert.Equal(t, want, w.metric(t, m, "tenure_session_losses_total", "cause", cause), "losses under %s", cause)
	}
	assert.Equal(t, float64(len(held)), w.metric(t, m, "tenure_partition_releases_total", "reason", "lost"))
	assert.Equal(t, 2.0, w.metric(t, m, "tenure_session_opened_total"))

	lines := w.log()
	assert.Empty(t, findLogs(lines, "forced release observed", nil))
	loss := findLogs(lines, "session lost: released", nil)
	require.Len(t, loss, 1, "one line for the partitions lost")
	assert.Equal(t, "expired", loss[0]["cause"])
	assert.Equal(t, float64(len(held)), loss[0]["count"])
	assert.Equal(t, partitionRanges(held), loss[0]["partitions"])
	var warns []string
	for _, l := range lines {
		if l["@level"] == "warn" {
			warns = append(warns, fmt.Sprint(l["@message"]))
		}
		_, one := l["partition"]
		assert.False(t, one && l["@level"] != "debug", "a line per partition: %v", l)
	}
	assert.LessOrEqual(t, len(warns), 3, "the pause's warnings: %q", warns)
	t.Logf("w lost %s; %d log lines; warnings: %q", partitionRanges(held), len(lines), warns)
}
