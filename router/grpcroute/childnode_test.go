package grpcroute_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// childNodeEnv, when set to "<cluster> <node ID> <partitions> <endpoint>...",
// makes the test binary run one node of that fleet instead of the tests
// (childNode): a node in a process of its own, which a test can freeze
// with SIGSTOP.
const childNodeEnv = "TENURE_GRPCROUTE_TEST_NODE"

// childTTL is the session TTL of the test fleets' nodes in their own
// processes, and of the nodes that share their fleets.
const childTTL = 2 * time.Second

// releaseKey is the etcd key whose creation lets a child node's handlers
// go on to their writes.
func releaseKey(cluster string) string { return "/grpcroute-test/" + cluster + "/release" }

// callKey is the key of the fenced store at which a call with the
// idempotency key idem records the node that applied it, and its epoch.
func callKey(idem string) string { return "/grpcroute-test/calls/" + idem }

// childNode runs the node childNodeEnv describes until its standard input
// ends, and returns the exit code: a grpcroute.Server and the counter
// service (fencedCounter) on a gRPC server on loopback, writing to the
// fleet's fenced etcd store, which the node raises to each epoch it
// acquires. Every call's handler prints "hold <idempotency key>" and
// waits for releaseKey before its write, then prints "write <key> ok",
// "write <key> stale" or "write <key> error <message>". It prints
// "ready <addr>" once it serves.
func childNode(spec string) int {
	f := strings.Fields(spec)
	if len(f) < 4 {
		fmt.Fprintf(os.Stderr, "%s: want <cluster> <id> <partitions> <endpoint>..., got %q\n", childNodeEnv, spec)
		return 2
	}
	name, id := f[0], f[1]
	var partitions int
	if _, err := fmt.Sscan(f[2], &partitions); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := serveChild(name, id, partitions, f[3:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func serveChild(name, id string, partitions int, endpoints []string) error {
	cli, err := clientv3.New(cluster.ClientConfig(endpoints))
	if err != nil {
		return err
	}
	defer cli.Close()
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	released := make(chan struct{})
	go waitKey(ctx, cli, releaseKey(name), released)

	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, ln.Addr().String()
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = childTTL
	cfg.Fencers = []fence.Fencer{store}
	jctx, jcancel := context.WithTimeout(ctx, 30*time.Second)
	defer jcancel()
	node, err := ownership.Join(jctx, cli, cfg)
	if err != nil {
		return err
	}
	defer node.Close(context.Background())
	rs, err := grpcroute.NewServer(node, grpcroute.ServerConfig{})
	if err != nil {
		return err
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	srv := grpc.NewServer(rs.ServerOptions()...)
	counterpb.RegisterCounterServer(srv, &fencedCounter{id: id, store: store,
		hold: func(idem string) {
			say("hold %s", idem)
			<-released
		},
		wrote: func(idem string, err error) {
			switch {
			case err == nil:
				say("write %s ok", idem)
			case errors.Is(err, fence.ErrStale):
				say("write %s stale", idem)
			default:
				say("write %s error %v", idem, err)
			}
		}})
	go func() { _ = srv.Serve(ln) }()
	say("ready %s", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent holds stdin: it ends when the parent does
	srv.Stop()
	return nil
}

// waitKey closes done once key exists in etcd, or returns when ctx ends.
func waitKey(ctx context.Context, cli *clientv3.Client, key string, done chan<- struct{}) {
	wch := cli.Watch(ctx, key, clientv3.WithCreatedNotify())
	<-wch // the watch exists: a creation from now on is seen
	if resp, err := cli.Get(ctx, key); err == nil && len(resp.Kvs) > 0 {
		close(done)
		return
	}
	for resp := range wch {
		if len(resp.Events) > 0 {
			close(done)
			return
		}
	}
}

// fencedCounter serves the counter service of a node whose writes go to
// a fenced etcd store: each call records, under the call's token, which
// node applied it and under which epoch, at callKey of its idempotency
// key. hold, if not nil, runs before the write; wrote, if not nil, is
// told the write's outcome.
type fencedCounter struct {
	counterpb.UnimplementedCounterServer
	id    string
	store *etcdfence.Store
	hold  func(idem string)
	wrote func(idem string, err error)
}

func (c *fencedCounter) Add(ctx context.Context, req *counterpb.AddRequest) (*counterpb.AddReply, error) {
	return c.apply(ctx, req.Delta)
}

func (c *fencedCounter) AddStream(s grpc.ClientStreamingServer[counterpb.AddRequest, counterpb.AddReply]) error {
	var sum int64
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		sum += req.Delta
	}
	reply, err := c.apply(s.Context(), sum)
	if err != nil {
		return err
	}
	return s.SendAndClose(reply)
}

// apply records the call of ctx, which added delta, in the store.
func (c *fencedCounter) apply(ctx context.Context, delta int64) (*counterpb.AddReply, error) {
	tok, ok := fence.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no token")
	}
	idem := grpcroute.IdempotencyKey(ctx)
	if c.hold != nil {
		c.hold(idem)
	}
	// The write does not look at the call's context, as in a process
	// paused between its decision and its write: only the store's fence
	// stops a write under a token whose tenure ended.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := c.store.Put(wctx, tok, callKey(idem), fmt.Appendf(nil, "%s %d", c.id, tok.Epoch))
	if c.wrote != nil {
		c.wrote(idem, err)
	}
	if err != nil {
		return nil, err
	}
	return &counterpb.AddReply{Node: c.id, Epoch: tok.Epoch, Value: delta}, nil
}
