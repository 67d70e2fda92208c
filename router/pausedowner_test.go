package router_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// childNodeEnv, when set to "<cluster> <node ID> <partitions> <endpoint>...",
// makes the test binary run one node of that fleet (TTL 2s) with a router
// and an HTTP server answering its ID and the request's token, instead of
// the tests: a node in a
// process of its own, which a test can pause with SIGSTOP.
const childNodeEnv = "TENURE_ROUTER_TEST_NODE"

// childNode runs the node childNodeEnv describes until its standard input
// ends, and returns the exit code. It prints "ready <addr>" once it serves.
func childNode(spec string) int {
	f := strings.Fields(spec)
	if len(f) < 4 {
		fmt.Fprintf(os.Stderr, "%s: want <cluster> <id> <partitions> <endpoint>..., got %q\n", childNodeEnv, spec)
		return 2
	}
	var partitions int
	if _, err := fmt.Sscan(f[2], &partitions); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cli, err := clientv3.New(cluster.ClientConfig(f[3:]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = f[0], f[1], ln.Addr().String()
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rt, err := router.New(node, router.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h, err := rt.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, cfg.NodeID+" "+r.Header.Get(httpfence.Header))
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/k/{key}", h)
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Printf("ready %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent holds stdin: it ends when the parent does
	return 0
}

// startChildNode starts node id of fleet name in a process of its own and
// returns it once it serves.
func startChildNode(t *testing.T, etcd *cluster.Cluster, name, id string, partitions int) *childproc.Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %s", childNodeEnv, name, id, partitions, strings.Join(etcd.Endpoints(), " ")))
	ready := make(chan string, 1)
	cmd.Stdout = &childproc.LineWriter{Line: func(b []byte) {
		if addr, ok := strings.CutPrefix(string(b), "ready "); ok {
			select {
			case ready <- addr:
			default:
			}
		}
	}}
	tail := &childproc.Tail{Size: 4 << 10}
	cmd.Stderr = tail
	p, err := childproc.Start(cmd, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGCONT)
		p.Kill()
	})
	select {
	case <-ready:
	case <-p.Exited():
		t.Fatalf("node %s exited: %v: %s", id, p.Err(), tail.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not start: %s", id, tail.String())
	}
	return p
}

// A request to an owner that is paused (SIGSTOP, in a process of its own)
// is answered by the partition's next owner while the paused one is still
// stopped: the Client's default per-attempt timeout (SessionTTL/2) gives up
// on the silent owner, and once its lease has expired the retry goes to the
// node that took the partition over. Without the bound, the request waits
// for the pause to end.
func TestClientPausedOwner(t *testing.T) {
	etcd := cluster.New(t, 1)
	const name, partitions = "paused", 16
	f := newFleet(t, etcd, name, fleetOptions{Partitions: partitions})
	f.start("live")
	sleeper := startChildNode(t, etcd, name, "sleeper", partitions)
	f.waitStable("sleeper")

	cli := etcd.NewClient(t)
	bounded := newClient(t, cli, router.ClientConfig{Cluster: name, SessionTTL: 2 * time.Second})
	unbounded := newClient(t, cli, router.ClientConfig{Cluster: name, SessionTTL: 2 * time.Second, AttemptTimeout: -1})
	var (
		key   string
		epoch int64 // the paused owner's epoch
	)
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("key-%d", i)
		if r := bounded.Lookup(k); r.Owner == "sleeper" && r.Epoch != 0 {
			key, epoch = k, r.Epoch
		}
	}
	fleettest.WaitRoute(t, unbounded, key, bounded.Lookup(key).Addr)

	get := func(c *router.Client) <-chan string {
		out := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, err := getVia(ctx, c, key, "/k/"+key)
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			out <- string(b)
		}()
		return out
	}

	require.NoError(t, sleeper.Stop())
	stopped := time.Now()
	waiting := get(unbounded)
	answer := <-get(bounded)
	took := time.Since(stopped)
	assert.Equal(t, "ok", answer, "the node that took the partition over answered")
	t.Logf("answered %v after the owner was paused (TTL 2s, attempt timeout 1s); %d attempts sent", took.Round(10*time.Millisecond), bounded.Stats().Attempts)
	select {
	case got := <-waiting:
		t.Fatalf("the request without a per-attempt bound was answered while its owner was paused: %s", got)
	default:
	}
	require.NoError(t, sleeper.Signal(syscall.SIGCONT))
	// Once the pause ends, the request without a bound is answered too: by
	// the node that took the partition over, or by the woken node after it
	// rejoined and claimed the partition again, never under its old epoch.
	late := <-waiting
	if id, token, ok := strings.Cut(late, " "); ok && id == "sleeper" {
		tok, err := fence.ParseToken(token)
		require.NoError(t, err, "answer %q", late)
		assert.Greater(t, tok.Epoch, epoch, "the woken owner served under a new epoch")
	} else {
		assert.Equal(t, "ok", late)
	}
}
