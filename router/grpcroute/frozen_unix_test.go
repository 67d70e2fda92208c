//go:build unix

package grpcroute_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// child is a node running in a process of its own (childNode), and what
// it printed.
type child struct {
	proc *childproc.Process
	tail *childproc.Tail

	mu     sync.Mutex
	holds  map[string]int      // handlers waiting before their writes, by idempotency key
	writes map[string][]string // outcomes of their writes, by idempotency key
	more   chan struct{}       // closed and replaced on every line
}

// startChild starts node id of fleet name in a process of its own and
// returns it once it serves.
func startChild(t *testing.T, etcd *cluster.Cluster, name, id string, partitions int) *child {
	t.Helper()
	c := &child{tail: &childproc.Tail{Size: 8 << 10}, holds: map[string]int{}, writes: map[string][]string{}, more: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %s", childNodeEnv, name, id, partitions, strings.Join(etcd.Endpoints(), " ")))
	ready := make(chan struct{})
	cmd.Stdout = &childproc.LineWriter{Line: func(b []byte) {
		f := strings.Fields(string(b))
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case len(f) == 2 && f[0] == "ready":
			close(ready)
		case len(f) == 2 && f[0] == "hold":
			c.holds[f[1]]++
		case len(f) >= 3 && f[0] == "write":
			c.writes[f[1]] = append(c.writes[f[1]], strings.Join(f[2:], " "))
		}
		close(c.more)
		c.more = make(chan struct{})
	}}
	cmd.Stderr = c.tail
	p, err := childproc.Start(cmd, nil)
	require.NoError(t, err)
	c.proc = p
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGCONT)
		p.Kill()
		if t.Failed() {
			t.Logf("--- stderr of %s\n%s", id, c.tail.String())
		}
	})
	select {
	case <-ready:
	case <-p.Exited():
		t.Fatalf("node %s exited: %v: %s", id, p.Err(), c.tail.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not start: %s", id, c.tail.String())
	}
	return c
}

// wait waits until cond, evaluated under the child's lock on every line it
// prints, returns "", and fails t with its last answer after 30s.
func (c *child) wait(t *testing.T, what string, cond func() string) {
	t.Helper()
	waitUntil(t, 30*time.Second, what, func() (string, <-chan struct{}) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return cond(), c.more
	})
}

// frozenCall is one call of TestFrozenOwner and what became of it.
type frozenCall struct {
	idem, key string
	stream    bool
	sent      time.Time
	answered  time.Time
	reply     *counterpb.AddReply
	err       error
}

// A node frozen with SIGSTOP (in a process of its own) for three times
// its TTL while calls for its keys are in flight, unary and streaming,
// sent before the freeze (its handlers are about to write when it
// freezes) and during it (as it begins, and when the first attempts are
// cut off): the Client cuts off each attempt that the
// frozen node leaves unanswered for AttemptTimeout (its default, TTL/2),
// sends it again with the same idempotency key, and once the node's lease
// has expired and the other node took its partitions over (raising the
// fenced store's floors), every call is answered there; none fails. When
// the frozen node resumes, its handlers' writes under their old tokens
// are refused by the store (fence.ErrStale), and each call's record in
// the store is the new owner's. The figures (time from send to answer,
// and from the new owner serving to the answer) are logged, not asserted.
func TestFrozenOwner(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	const name, partitions = "frozen", 16
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	a := startChild(t, etcd, name, "a", partitions)
	b := startFencedNode(t, cli, store, name, "b", partitions)
	waitUntil(t, 30*time.Second, "the fleet did not settle", func() (string, <-chan struct{}) {
		ch := b.Changed()
		r := b.Ring()
		if !slices.Equal(r.Members(), []string{"a", "b"}) {
			return fmt.Sprintf("b sees members %v", r.Members()), ch
		}
		for p := range partitions {
			owner, _ := r.Owner(p)
			if route := b.LookupPartition(p); route.Owner != owner || route.Epoch == 0 {
				return fmt.Sprintf("partition %d routes to %s epoch %d, ring owner %s", p, route.Owner, route.Epoch, owner), ch
			}
		}
		return "", nil
	})

	var (
		amu      sync.Mutex
		attempts = map[string]int{} // by idempotency key
		retried  = make(chan struct{})
	)
	count := func(ctx context.Context) {
		md, _ := metadata.FromOutgoingContext(ctx)
		amu.Lock()
		defer amu.Unlock()
		for _, idem := range md.Get(grpcroute.MetadataIdempotencyKey) {
			if attempts[idem]++; attempts[idem] == 2 && idem == "frozen-call-0" {
				close(retried)
			}
		}
	}
	c, counter := newClient(t, cli, name, grpcroute.ClientConfig{SessionTTL: childTTL},
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			count(ctx)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			count(ctx)
			return streamer(ctx, desc, cc, method, opts...)
		}))
	// The keys of a, one per call: four calls before the freeze, four
	// when it begins, two when the first call's first attempt has been
	// cut off.
	var keys []string
	old := map[string]int64{} // epoch of a's claim, by key
	for i := 0; len(keys) < 10; i++ {
		k := fmt.Sprintf("frozen-%d", i)
		if r := b.Lookup(k); r.Owner == "a" {
			keys, old[k] = append(keys, k), r.Epoch
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	calls := make([]*frozenCall, len(keys))
	var wg sync.WaitGroup
	send := func(i int) {
		fc := &frozenCall{idem: fmt.Sprintf("frozen-call-%d", i), key: keys[i], stream: i%2 == 1, sent: time.Now()}
		calls[i] = fc
		wg.Go(func() {
			cctx := metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataIdempotencyKey, fc.idem)
			req := &counterpb.AddRequest{Key: fc.key, Delta: 1}
			if !fc.stream {
				fc.reply, fc.err = counter.Add(cctx, req)
			} else if s, err := counter.AddStream(grpcroute.WithKey(cctx, fc.key)); err != nil {
				fc.err = err
			} else if fc.err = s.Send(req); fc.err == nil {
				fc.reply, fc.err = s.CloseAndRecv()
			}
			fc.answered = time.Now()
		})
	}
	for i := range 4 {
		send(i)
	}
	a.wait(t, "a's handlers of the calls before the freeze", func() string {
		for _, fc := range calls[:4] {
			if a.holds[fc.idem] == 0 {
				return fc.idem + " is not held yet"
			}
		}
		return ""
	})

	require.NoError(t, a.proc.Stop())
	stopped := time.Now()
	for i := 4; i < 8; i++ {
		send(i)
	}
	<-retried
	for i := 8; i < len(keys); i++ {
		send(i)
	}
	var expired, served time.Time // b saw a's lease expire; b served every key
	waitUntil(t, 30*time.Second, "b did not take a's keys over", func() (string, <-chan struct{}) {
		ch := b.Changed()
		if expired.IsZero() && !slices.Contains(b.Ring().Members(), "a") {
			expired = time.Now()
		}
		for _, k := range keys {
			if r := b.Lookup(k); !r.Local || r.Epoch <= old[k] {
				return k + " routes to " + r.Owner, ch
			}
		}
		served = time.Now()
		return "", nil
	})
	wg.Wait() // every call has its answer
	freeze := time.NewTimer(time.Until(stopped.Add(3 * childTTL)))
	<-freeze.C // the freeze lasts three TTLs
	require.NoError(t, a.proc.Signal(syscall.SIGCONT))

	rel := func(t time.Time) float64 { return t.Sub(stopped).Seconds() }
	t.Logf("TTL %v, AttemptTimeout %v (default TTL/2); a frozen at 0s for %v; b saw a's lease expire at %+.2fs and served a's keys from %+.2fs",
		childTTL, childTTL/2, 3*childTTL, rel(expired), rel(served))
	for _, fc := range calls {
		kind := map[bool]string{false: "unary", true: "stream"}[fc.stream]
		require.NoError(t, fc.err, "%s call %s", kind, fc.idem)
		amu.Lock()
		n := attempts[fc.idem]
		amu.Unlock()
		t.Logf("%-6s %s: sent at %+.2fs, answered at %+.2fs (%.2fs after sending, %+.2fs after b served) by %s epoch %d, %d attempts",
			kind, fc.idem, rel(fc.sent), rel(fc.answered), fc.answered.Sub(fc.sent).Seconds(), fc.answered.Sub(served).Seconds(),
			fc.reply.Node, fc.reply.Epoch, n)
		assert.Equal(t, "b", fc.reply.Node, "%s was answered by the new owner", fc.idem)
		assert.Greater(t, fc.reply.Epoch, old[fc.key], "%s was answered under a newer epoch", fc.idem)
	}
	st := c.Stats()
	t.Logf("client: %d calls, %d attempts, %d retries, %d failed", len(calls), st.Attempts, st.Retries, st.Failed)
	assert.Zero(t, st.Failed)

	// a's handlers go on to their writes under their old tokens: the
	// store refuses every one.
	_, err = cli.Put(ctx, releaseKey(name), "")
	require.NoError(t, err)
	a.wait(t, "a's writes after the freeze", func() string {
		for idem, n := range a.holds {
			if len(a.writes[idem]) < n {
				return fmt.Sprintf("%s: %d of %d writes", idem, len(a.writes[idem]), n)
			}
		}
		return ""
	})
	a.mu.Lock()
	for _, fc := range calls[:4] {
		assert.NotEmpty(t, a.writes[fc.idem], "a's late write of %s", fc.idem)
	}
	for idem, outcomes := range a.writes {
		for _, o := range outcomes {
			assert.Equal(t, "stale", o, "a's late write of %s", idem)
		}
		t.Logf("a's late write of %s after the freeze: %s", idem, strings.Join(outcomes, ", "))
	}
	a.mu.Unlock()
	for _, fc := range calls {
		resp, err := cli.Get(ctx, callKey(fc.idem))
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "the record of %s", fc.idem)
		assert.Equal(t, fmt.Sprintf("b %d", fc.reply.Epoch), string(resp.Kvs[0].Value), "the record of %s is the new owner's", fc.idem)
	}
}

// startFencedNode joins node id of fleet name in this process, with
// session TTL childTTL and store as its fencer, serving the counter
// service (fencedCounter) through a grpcroute.Server on loopback. It
// leaves at the test's end.
func startFencedNode(t *testing.T, cli *clientv3.Client, store *etcdfence.Store, name, id string, partitions int) *ownership.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, ln.Addr().String()
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = childTTL
	cfg.Fencers = []fence.Fencer{store}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	rs, err := grpcroute.NewServer(node, grpcroute.ServerConfig{})
	require.NoError(t, err)
	srv := grpc.NewServer(rs.ServerOptions()...)
	counterpb.RegisterCounterServer(srv, &fencedCounter{id: id, store: store})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := node.Close(ctx); err != nil {
			t.Errorf("close node %s: %v", id, err)
		}
		srv.GracefulStop()
		<-served
		rs.Close()
	})
	return node
}
