package refusal_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// world is what TestEveryKindOnBothWires refuses requests with, on one
// embedded etcd. For each wire (its nodes serve HTTP through a
// router.Handler, or gRPC through a grpcroute.Server, on loopback at
// their advertised address): a stable fleet of two nodes a and b, a node
// acquiring its one partition (its OnAcquired blocks until the test ends),
// and a node that the session-lost scenario closes. A fenced service
// (httpfence.Handler) refuses tokens. The clients are the real ones, with
// one attempt per call, so that a call the client would retry ends with
// its ErrRetriesExhausted and the refusal: router.Client of the HTTP
// fleet and grpcroute.Client's interceptor. Both are aimed at a chosen
// server (aim; grpcConn), as a caller whose view is behind would send.
type world struct {
	etcd    *cluster.Cluster
	cli     *clientv3.Client
	release chan struct{} // ends the acquiring nodes' OnAcquired

	http, grpc wire
	svc        string // the fenced service's address

	hc *router.Client
	gc *grpcroute.Client

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address
}

// wire is the servers of one wire.
type wire struct {
	a, b, acquiring, closing *server
}

// server is a node with the server of its wire at its address.
type server struct {
	id, addr string
	node     *ownership.Node
}

// handoffWait bounds the servers' wait for a handoff: the acquiring
// node's refusals come after it.
const handoffWait = 100 * time.Millisecond

func newWorld(t *testing.T) *world {
	w := &world{etcd: cluster.New(t, 1), release: make(chan struct{}), conns: map[string]*grpc.ClientConn{}}
	w.cli = w.etcd.NewClient(t)
	for _, grpcWire := range []bool{false, true} {
		name := map[bool]string{false: "kinds-http", true: "kinds-grpc"}[grpcWire]
		wr := wire{a: w.start(t, name, "a", 8, grpcWire, nil), b: w.start(t, name, "b", 8, grpcWire, nil)}
		entered := make(chan struct{}, 1)
		wr.acquiring = w.start(t, name+"-acquiring", "h", 1, grpcWire, entered)
		<-entered
		wr.closing = w.start(t, name+"-closing", "c", 1, grpcWire, nil)
		fleettest.WaitUntil(t, 30*time.Second, name+" is not stable", func() (string, <-chan struct{}) {
			return fleettest.Unstable([]*ownership.Node{wr.a.node, wr.b.node})
		})
		if grpcWire {
			w.grpc = wr
		} else {
			w.http = wr
		}
	}
	t.Cleanup(func() { close(w.release) }) // before the nodes close

	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	verifier, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": pub})
	require.NoError(t, err)
	var floors fence.Gate
	svc, err := httpfence.New(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok") }),
		httpfence.Config{Verifier: verifier, Fencer: &floors})
	require.NoError(t, err)
	w.svc = w.serveHTTP(t, svc)

	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	hcfg := router.ClientConfig{Cluster: "kinds-http", HTTPClient: &http.Client{Transport: &aimedTransport{base: transport}}}
	hcfg.Backoff.MaxAttempts, hcfg.Backoff.Initial, hcfg.Backoff.Max = 1, time.Millisecond, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.hc, err = router.NewClient(ctx, w.cli, hcfg)
	require.NoError(t, err)
	t.Cleanup(w.hc.Close)
	var gcfg grpcroute.ClientConfig
	gcfg.Backoff.MaxAttempts, gcfg.Backoff.Initial, gcfg.Backoff.Max = 1, time.Millisecond, time.Millisecond
	w.gc, err = grpcroute.NewClient(w.cli, gcfg)
	require.NoError(t, err)
	t.Cleanup(w.gc.Close)
	t.Cleanup(func() {
		for _, c := range w.conns {
			_ = c.Close()
		}
	})
	return w
}

// start joins node id of cluster name (of the given partitions) with the
// server of its wire. A node given entered is acquiring: its OnAcquired
// says so on entered and blocks until the world is released.
func (w *world) start(t *testing.T, name, id string, partitions int, grpcWire bool, entered chan<- struct{}) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &server{id: id, addr: ln.Addr().String()}
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, s.addr
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = 2 * time.Second
	if entered != nil {
		cfg.AcquiredTimeout = time.Hour // only OnAcquired's return admits work
		cfg.Callbacks.OnAcquired = func(e ownership.Event) {
			entered <- struct{}{}
			select {
			case <-w.release:
			case <-e.Context.Done():
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.node, err = ownership.Join(ctx, w.etcd.NewClient(t), cfg)
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = s.node.Close(context.Background()) })
	if grpcWire {
		rs, err := grpcroute.NewServer(s.node, grpcroute.ServerConfig{HandoffWait: handoffWait})
		require.NoError(t, err)
		t.Cleanup(rs.Close)
		srv := grpc.NewServer(rs.ServerOptions()...)
		healthpb.RegisterHealthServer(srv, &healthService{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(ln)
		}()
		t.Cleanup(func() {
			srv.Stop()
			<-done
		})
		return s
	}
	rt, err := router.New(s.node, router.Config{HandoffWait: handoffWait})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	h, err := rt.Handler(router.KeyFromPathValue("key"), local())
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/{op}/{key}", h)
	mux.Handle("/nokey/{key}", &router.Handler{Router: rt, Local: local()}) // no key function
	w.serveOn(t, ln, mux)
	return s
}

// serveHTTP serves h on a loopback address, until the test ends, and
// returns the address.
func (w *world) serveHTTP(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w.serveOn(t, ln, h)
	return ln.Addr().String()
}

func (w *world) serveOn(t *testing.T, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
}

// local is the local handler of the HTTP nodes: /stale/{key} writes to a
// store that refuses the write as stale, /unavailable/{key} meets an etcd
// without a leader; both answer with router.WriteError.
func local() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/{key}", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok") })
	for op, work := range map[string]func(ctx context.Context) error{"stale": staleWrite, "unavailable": noLeader} {
		mux.HandleFunc("/"+op+"/{key}", func(rw http.ResponseWriter, r *http.Request) {
			if err := work(r.Context()); !router.WriteError(rw, r, err) {
				http.Error(rw, fmt.Sprint(err), http.StatusInternalServerError)
			}
		})
	}
	return mux
}

// staleWrite writes under ctx's token to a fenced store that a newer
// tenure of the scope has written to (its floor is the token's epoch + 1):
// the store refuses the write as stale.
func staleWrite(ctx context.Context) error {
	tok, ok := fence.FromContext(ctx)
	if !ok {
		return errors.New("no token in the work's context")
	}
	var store fence.Gate
	if err := store.Advance(ctx, fence.Token{Scope: tok.Scope, Epoch: tok.Epoch + 1}); err != nil {
		return err
	}
	return store.Do(tok, func() error { return nil })
}

// noLeader is the error of an etcd call that etcd could not serve for now.
func noLeader(context.Context) error { return fmt.Errorf("put: %w", rpctypes.ErrGRPCNoLeader) }

// healthService is the gRPC nodes' service: Check of service "stale" or
// "unavailable" fails as local's handlers do; of a refusal kind with a
// fencing error (invalid-token, ...), with that error; any other is
// served.
type healthService struct {
	healthpb.UnimplementedHealthServer
}

func (healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch req.Service {
	case "stale":
		return nil, staleWrite(ctx)
	case "unavailable":
		return nil, noLeader(ctx)
	}
	if row, ok := refusal.Lookup(refusal.Kind(req.Service)); ok && row.Err != nil {
		return nil, fmt.Errorf("downstream: %w", row.Err)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// aim is where the HTTP client's request goes instead of the owner it
// resolves, and the answer's status and header.
type aim struct {
	addr      string
	forwarded bool // the request says it was forwarded: it is not forwarded again
	status    int
	header    http.Header
}

type aimKey struct{}

// aimedTransport sends a request whose context carries an *aim to its
// address, and records the answer's status and header in it.
type aimedTransport struct{ base *http.Transport }

func (a *aimedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	to, _ := req.Context().Value(aimKey{}).(*aim)
	if to == nil {
		return a.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.URL.Host = to.addr
	if to.forwarded {
		req.Header.Set("Tenure-Forwarded", "misdirected") // as a router forwards it
	}
	resp, err := a.base.RoundTrip(req)
	if err == nil {
		to.status, to.header = resp.StatusCode, resp.Header.Clone()
	}
	return resp, err
}

// grpcConn returns a connection to addr through the gRPC client's
// interceptor (its retries and its reading of refusals), without its
// balancer: every call goes to addr.
func (w *world) grpcConn(t *testing.T, addr string) *grpc.ClientConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.conns[addr]; c != nil {
		return c
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(w.gc.Unary))
	require.NoError(t, err)
	w.conns[addr] = c
	return c
}
