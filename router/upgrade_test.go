//go:build unix

package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// buildNode builds router/internal/upgradenode with the build tags tags
// (none: this build) and returns the binary's path.
func buildNode(t *testing.T, name string, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, "./internal/upgradenode")...).CombinedOutput()
	require.NoError(t, err, "go build %v: %s", tags, out)
	return bin
}

// nodeProc is an upgradenode process: its address once it listens and its
// log lines.
type nodeProc struct {
	id   string
	proc *childproc.Process

	mu    sync.Mutex
	addr  string
	lines []string
	more  chan struct{} // closed and replaced on every line
}

// startNode starts bin as node id of the fleet name on endpoints; it does
// not wait for it to listen (see listening).
func startNode(t *testing.T, bin string, endpoints []string, name, id string, partitions int) *nodeProc {
	t.Helper()
	n := &nodeProc{id: id, more: make(chan struct{})}
	cmd := exec.Command(bin, "-endpoints", strings.Join(endpoints, ","), "-cluster", name, "-id", id,
		"-partitions", fmt.Sprint(partitions))
	cmd.Stdout = &childproc.LineWriter{Line: func(b []byte) {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "addr" {
			n.add("", f[1])
		}
	}}
	cmd.Stderr = &childproc.LineWriter{Line: func(b []byte) { n.add(string(b), "") }}
	p, err := childproc.Start(cmd, nil)
	require.NoError(t, err)
	n.proc = p
	t.Cleanup(func() {
		p.Term(15 * time.Second)
		if t.Failed() {
			n.mu.Lock()
			t.Logf("--- log of %s (%s)\n%s", id, bin, strings.Join(n.lines, "\n"))
			n.mu.Unlock()
		}
	})
	return n
}

func (n *nodeProc) add(line, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if line != "" {
		n.lines = append(n.lines, line)
	}
	if addr != "" {
		n.addr = addr
	}
	close(n.more)
	n.more = make(chan struct{})
}

// listening waits until n listens and returns its address.
func (n *nodeProc) listening(t *testing.T) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		n.mu.Lock()
		addr, more := n.addr, n.more
		n.mu.Unlock()
		if addr != "" {
			return addr
		}
		select {
		case <-more:
		case <-n.proc.Exited():
			t.Fatalf("%s exited before it listened: %v", n.id, n.proc.Err())
		case <-deadline:
			t.Fatalf("%s does not listen", n.id)
		}
	}
}

// servedBy reports why c does not route every partition to one of procs
// at the address it listens on, nil if it does.
func servedBy(c *router.Client, partitions int, procs map[string]*nodeProc) error {
	for p := range partitions {
		r := c.LookupPartition(p)
		n, ok := procs[r.Owner]
		if !ok || r.Epoch == 0 {
			return fmt.Errorf("partition %d: owner %q epoch %d", p, r.Owner, r.Epoch)
		}
		n.mu.Lock()
		addr := n.addr
		n.mu.Unlock()
		if r.Addr != addr {
			return fmt.Errorf("partition %d: %s at %s, listening at %s", p, r.Owner, r.Addr, addr)
		}
	}
	return nil
}

// waitClient waits until cond holds for c, checking on every change c
// sees (the processes' addresses are known before: see listening).
func waitClient(t *testing.T, c *router.Client, cond func() error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ch := c.Changed()
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waiting: %v", err)
		}
	}
}

// TestRollingUpgradeBuilds builds the node (router/internal/upgradenode)
// twice, as this build and with the tag featurelevel_prev (a build
// of the feature level before placements), runs three processes of the
// older build under keyed load through a router.Client, and replaces them
// one by one with the newer build (SIGTERM, then the new binary under the
// same ID): no request fails. While any older process runs, a pin (which
// needs placements) is refused naming the older members; after the last,
// the pin is taken, and a process of the older build is then refused at
// Join, naming the feature, and leaves no member key.
func TestRollingUpgradeBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the node twice")
	}
	oldBin := buildNode(t, "node-prev", "featurelevel_prev")
	newBin := buildNode(t, "node")
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	const P, name = 32, "upgrade"
	ids := []string{"n1", "n2", "n3"}
	procs := map[string]*nodeProc{}
	var procsMu sync.Mutex
	for _, id := range ids {
		procs[id] = startNode(t, oldBin, etcd.Endpoints(), name, id, P)
		procs[id].listening(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, cli, router.ClientConfig{Cluster: name, SessionTTL: 2 * time.Second})
	served := func() error {
		procsMu.Lock()
		defer procsMu.Unlock()
		return servedBy(c, P, procs)
	}
	waitClient(t, c, served)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	ms, err := op.Members(ctx)
	require.NoError(t, err)
	for _, m := range ms {
		assert.Equal(t, []string{fleetview.FeatureWeightedRing}, m.Features, "%s runs the older build", m.ID)
	}

	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	for w := range 4 {
		wg.Go(func() {
			for i := 0; lctx.Err() == nil; i++ {
				key := fmt.Sprintf("key-%d-%d", w, i%200)
				err := sendKeyed(lctx, c, key, fmt.Sprintf("w%d-%d", w, i))
				switch {
				case err == nil:
					ok.Add(1)
				case lctx.Err() == nil:
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	defer func() { stopLoad(); wg.Wait() }()

	who := fleet.Action{Actor: "test", Reason: "mixed builds"}
	var during []int64 // requests served while each process was replaced
	for i, id := range ids {
		_, err := op.Pin(ctx, 0, "n1", who)
		require.ErrorIs(t, err, ring.ErrFeatureUnsupported, "a pin before %s is upgraded", id)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q is not understood by member(s) %s (", fleetview.FeaturePlacements, strings.Join(ids[i:], ", ")),
			"the members of the older build")

		procsMu.Lock()
		old := procs[id]
		procsMu.Unlock()
		before := ok.Load()
		require.NoError(t, old.proc.Signal(syscall.SIGTERM))
		select {
		case <-old.proc.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not leave", id)
		}
		require.NoError(t, old.proc.Err(), "%s left gracefully", id)
		next := startNode(t, newBin, etcd.Endpoints(), name, id, P)
		next.listening(t)
		procsMu.Lock()
		procs[id] = next
		procsMu.Unlock()
		waitClient(t, c, served)
		during = append(during, ok.Load()-before)
		waitServed(ctx, &ok, before+200) // the load runs across each replacement
	}
	waitServed(ctx, &ok, ok.Load()+500)
	stats := c.Stats() // before the load stops: then requests are cut off on purpose
	stopLoad()
	wg.Wait()

	ms, err = op.Members(ctx)
	require.NoError(t, err)
	for _, m := range ms {
		assert.Equal(t, fleetview.Features(), m.Features, "%s runs the newer build", m.ID)
	}
	_, err = op.Pin(ctx, 0, "n1", who)
	require.NoError(t, err, "every member understands placements")
	st, err := op.Status(ctx)
	require.NoError(t, err)
	assert.Contains(t, st.Requires, fleetview.FeaturePlacements)

	late := startNode(t, oldBin, etcd.Endpoints(), name, "n4", P)
	select {
	case <-late.proc.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("an older build joined a fleet that uses placements")
	}
	require.Error(t, late.proc.Err())
	late.mu.Lock()
	refusal := joinError(late.lines)
	late.mu.Unlock()
	// The refusal names a feature the fleet requires and the older build
	// lacks (placements, or handover once every member of the new build
	// has recorded it).
	named := regexp.MustCompile(`protocol feature "(\w+)", which this build does not understand`).FindStringSubmatch(refusal)
	if assert.NotNil(t, named, "the refusal names no feature: %s", refusal) {
		now, err := op.Status(ctx)
		require.NoError(t, err)
		assert.Contains(t, now.Requires, named[1], "the named feature is one the fleet requires")
		assert.Contains(t, []string{fleetview.FeaturePlacements, fleetview.FeatureHandover}, named[1], "the named feature is one the older build lacks")
	}
	resp, err := cli.Get(ctx, keys.New(name).Member("n4"))
	require.NoError(t, err)
	assert.Empty(t, resp.Kvs, "a refused node leaves no member key")

	assert.Zero(t, failed.Load(), "requests that failed: %v", failures)
	assert.Zero(t, stats.Failed, "the client's failed requests")
	require.Positive(t, ok.Load())
	t.Logf("rolling upgrade of %d processes from the previous feature level through router.Client: %d requests served (%v while each was replaced), %d failed; client: %d attempts, %d retried",
		len(ids), ok.Load(), during, failed.Load(), stats.Attempts, stats.Retries)
}

// sendKeyed sends one request for key through c, with idem as its idempotency
// key, and returns an error unless it was answered 200 with the token the
// work ran under.
func sendKeyed(ctx context.Context, c *router.Client, key, idem string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+key, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(router.HeaderIdempotencyKey, idem)
	resp, err := c.Do(ctx, key, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "ok ") {
		return fmt.Errorf("%s: %s %q", key, resp.Status, body)
	}
	return nil
}

// waitServed waits until served reaches n or ctx ends.
func waitServed(ctx context.Context, served *atomic.Int64, n int64) {
	for served.Load() < n && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // a count of requests, not a timed assertion
	}
}

// joinError returns the error of the "join" log line among lines, "" if
// none.
func joinError(lines []string) string {
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["@message"] != "join" {
			continue
		}
		if s, ok := m["error"].(string); ok {
			return s
		}
	}
	return strings.Join(lines, "\n")
}
