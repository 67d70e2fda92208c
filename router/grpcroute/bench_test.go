package grpcroute_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// benchSetup returns a routed counter client of a one-node fleet and a
// plain client of a plain gRPC server of the same service on loopback.
func benchSetup(b *testing.B) (routed, plain counterpb.CounterClient) {
	k := benchKinds(b)
	return kindNamed(k, "routed"), k[0].cli
}

// kindNamed returns the client of the benchKind called name.
func kindNamed(kinds []benchKind, name string) counterpb.CounterClient {
	i := slices.IndexFunc(kinds, func(k benchKind) bool { return k.name == name })
	return kinds[i].cli
}

// benchKind is a way of calling the counter service: a client on a
// connection of its own, and whether its calls carry by hand the metadata
// a routed call carries.
type benchKind struct {
	name string
	cli  counterpb.CounterClient
	md   bool
}

// benchKinds returns the ways a benchmark compares, each adding a part of
// routing to the one before, all to the same counter service (handler and
// store) on loopback: a plain client of a plain gRPC server; the same with
// the two metadata of a routed call; a client with only the Client's
// interceptor, to the plain server; a plain client with the metadata, to
// the routed server of a one-node fleet (interceptor, Hold, work context);
// a routed client (resolver, owner balancer, interceptor) to that server;
// the same without the per-attempt bound (ClientConfig.AttemptTimeout
// negative: unbounded), which shows what the bound costs;
// a routed client with ClientConfig.OmitKeyMetadata to the routed server
// of another one-node fleet whose ServerConfig.Key takes the key from the
// request (omit); and the same with ClientConfig.NoIdempotencyKey for Get,
// a read, whose calls carry no metadata at all (lean).
func benchKinds(b *testing.B) []benchKind {
	etcd := cluster.New(b, 1)
	f := newFleet(b, etcd, "bench", false)
	a := f.start("a")
	f.waitStable()
	c, routed := newClient(b, f.cli, "bench", grpcroute.ClientConfig{})
	_, unbounded := newClient(b, f.cli, "bench", grpcroute.ClientConfig{AttemptTimeout: -1})
	fk := newFleet(b, etcd, "benchkey", false)
	fk.serverKey = requestKey
	fk.start("a")
	fk.waitStable()
	_, omit := newClient(b, f.cli, "benchkey", grpcroute.ClientConfig{OmitKeyMetadata: true})
	reads := func(method string) bool { return method == counterpb.Counter_Get_FullMethodName }
	_, lean := newClient(b, f.cli, "benchkey", grpcroute.ClientConfig{OmitKeyMetadata: true, NoIdempotencyKey: reads})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := grpc.NewServer()
	counterpb.RegisterCounterServer(srv, &counterService{id: "plain", store: f.store})
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	plain := ln.Addr().String()
	kinds := []benchKind{
		{name: "plain", cli: counterpb.NewCounterClient(dial(b, plain))},
		{name: "plain+md", cli: counterpb.NewCounterClient(dial(b, plain)), md: true},
		{name: "interceptor", cli: counterpb.NewCounterClient(dial(b, plain, grpc.WithChainUnaryInterceptor(c.Unary)))},
		{name: "md-to-server", cli: counterpb.NewCounterClient(dial(b, a.addr)), md: true},
		{name: "routed", cli: routed},
		{name: "unbounded", cli: unbounded},
		{name: "omit", cli: omit},
		{name: "lean", cli: lean},
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), grpcroute.MetadataKey, "k")
	for range 100 { // warm the connections up
		for _, k := range kinds {
			_, err := k.cli.Get(ctx, &counterpb.GetRequest{Key: "k"})
			require.NoError(b, err)
		}
	}
	return kinds
}

func dial(tb testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// BenchmarkUnaryLatency makes, in turn, one call of each of benchKinds'
// ways (so that every call follows one on another connection, and all see
// the same moments of a shared machine), and reports the p50 of the plain
// and the routed call, their ratio (the goal is at most 1.1), and the
// ratio of each other way's p50 to the plain call's: what each part of
// routing adds, and the routed calls with less metadata (omit, lean). A call that carries the metadata by hand has the keys a
// Client would give it (a MetadataIdempotencyKey unique to the call).
func BenchmarkUnaryLatency(b *testing.B) {
	kinds := benchKinds(b)
	ctx := context.Background()
	lat := make([][]time.Duration, len(kinds))
	prefix := rand.Text()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := &counterpb.GetRequest{Key: fmt.Sprintf("k%d", i%64)}
		for j, k := range kinds {
			cctx := ctx
			if k.md {
				cctx = metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataKey, req.Key,
					grpcroute.MetadataIdempotencyKey, prefix+"."+strconv.FormatInt(int64(i), 36))
			}
			t0 := time.Now()
			if _, err := k.cli.Get(cctx, req); err != nil {
				b.Fatal(k.name, err)
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	b.StopTimer()
	routed := slices.IndexFunc(kinds, func(k benchKind) bool { return k.name == "routed" })
	p, r := pct(lat[0], 50), pct(lat[routed], 50)
	b.ReportMetric(float64(r.Microseconds()), "routed-p50-µs")
	b.ReportMetric(float64(p.Microseconds()), "plain-p50-µs")
	b.ReportMetric(float64(r)/float64(p), "p50-ratio")
	for j, k := range kinds {
		if j == 0 || j == routed {
			continue
		}
		b.ReportMetric(float64(pct(lat[j], 50))/float64(p), k.name+"-p50-ratio")
	}
}

// BenchmarkUnaryThroughput runs b.N plain calls, b.N routed calls and
// b.N of each of benchKinds' omit and lean calls, each from 32
// goroutines, in 4 alternating rounds of each kind (so that all see the
// same moments of a shared machine), and reports the calls per second of
// the first two and the ratio of each routed kind to plain.
func BenchmarkUnaryThroughput(b *testing.B) {
	kinds := benchKinds(b)
	plain := kinds[0].cli
	routed, omit, lean := kindNamed(kinds, "routed"), kindNamed(kinds, "omit"), kindNamed(kinds, "lean")
	run := func(c counterpb.CounterClient, calls int) time.Duration {
		var (
			n  atomic.Int64
			wg sync.WaitGroup
		)
		start := time.Now()
		for w := range 32 {
			wg.Go(func() {
				req := &counterpb.GetRequest{Key: fmt.Sprintf("k%d", w)}
				for n.Add(1) <= int64(calls) {
					if _, err := c.Get(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	const rounds = 4
	var p, r, o, l time.Duration
	b.ResetTimer()
	for i := range rounds {
		calls := b.N/rounds + map[bool]int{true: b.N % rounds}[i == 0]
		p += run(plain, calls)
		r += run(routed, calls)
		o += run(omit, calls)
		l += run(lean, calls)
	}
	b.StopTimer()
	rps, pps := float64(b.N)/r.Seconds(), float64(b.N)/p.Seconds()
	b.ReportMetric(rps, "routed-calls/s")
	b.ReportMetric(pps, "plain-calls/s")
	b.ReportMetric(rps/pps, "throughput-ratio")
	b.ReportMetric(p.Seconds()/o.Seconds(), "omit-throughput-ratio")
	b.ReportMetric(p.Seconds()/l.Seconds(), "lean-throughput-ratio")
}

// BenchmarkMoves measures routed Add calls from 4 goroutines: first 2000
// in steady state on a fleet of three, then while a fourth node joins and
// leaves (each time about a quarter of the partitions move twice), and
// reports the p99 of each phase, their ratio and the calls that failed
// (there must be none). One iteration is one steady phase and one join and
// leave; run it with -benchtime=1x or a few x.
func BenchmarkMoves(b *testing.B) {
	etcd := cluster.New(b, 1)
	f := newFleet(b, etcd, "moves", false)
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	_, counter := newClient(b, f.cli, "moves", grpcroute.ClientConfig{})
	var failed atomic.Int64
	load := func(stop <-chan struct{}, calls int) []time.Duration {
		var (
			mu  sync.Mutex
			lat []time.Duration
			n   atomic.Int64
			wg  sync.WaitGroup
		)
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					if stop != nil {
						select {
						case <-stop:
							return
						default:
						}
					} else if n.Add(1) > int64(calls) {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					t0 := time.Now()
					_, err := counter.Add(ctx, &counterpb.AddRequest{Key: fmt.Sprintf("w%d-%d", w, i%50), Delta: 1})
					d := time.Since(t0)
					cancel()
					if err != nil {
						failed.Add(1)
						continue
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return lat
	}
	var steady, moving []time.Duration
	b.ResetTimer()
	for range b.N {
		steady = append(steady, load(nil, 2000)...)
		stop := make(chan struct{})
		got := make(chan []time.Duration)
		go func() { got <- load(stop, 0) }()
		f.start("d")
		f.waitStable()
		f.stopMember("d")
		f.waitStable()
		close(stop)
		moving = append(moving, <-got...)
	}
	b.StopTimer()
	s, m := pct(steady, 99), pct(moving, 99)
	b.ReportMetric(float64(s.Microseconds()), "steady-p99-µs")
	b.ReportMetric(float64(m.Microseconds()), "moves-p99-µs")
	b.ReportMetric(float64(m)/float64(s), "p99-ratio")
	b.ReportMetric(float64(len(moving))/float64(b.N), "calls-during-moves")
	b.ReportMetric(float64(failed.Load()), "failed")
}

// pct returns the q-th percentile of ds.
func pct(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

// BenchmarkUnaryCall runs b.N sequential calls of one kind, plain or
// routed, so that each has its own time, bytes and allocations per call
// (and its own CPU profile with -cpuprofile and -bench UnaryCall/routed).
func BenchmarkUnaryCall(b *testing.B) {
	routed, plain := benchSetup(b)
	for _, c := range []struct {
		name string
		cli  counterpb.CounterClient
	}{{"plain", plain}, {"routed", routed}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			req := &counterpb.GetRequest{Key: "k1"}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.cli.Get(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
