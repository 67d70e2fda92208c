package router_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/workload"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// BenchmarkRouting measures the local routing overhead: Do on a key this
// node owns with work that does nothing, with a plain and with a
// cancellable caller context, next to the bare lookups it builds on, and
// with a TracerProvider beside it without one.
func BenchmarkRouting(b *testing.B) {
	etcd := cluster.New(b, 1)
	f := newFleet(b, etcd, "bench-routing", fleetOptions{Partitions: 64})
	m := f.start("solo")
	f.waitStable()
	c, err := router.NewClient(context.Background(), etcd.NewClient(b), router.ClientConfig{Cluster: "bench-routing", Partitions: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	noop := func(context.Context, fence.Token) error { return nil }
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}

	b.Run("node.Lookup", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = m.node.Lookup(keys[i&1023])
		}
	})
	b.Run("client.Lookup", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = c.Lookup(keys[i&1023])
		}
	})
	b.Run("Do", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if err := m.router.Do(ctx, keys[i&1023], noop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Do/cancellable-ctx", func(b *testing.B) {
		b.ReportAllocs()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := 0; b.Loop(); i++ {
			if err := m.router.Do(ctx, keys[i&1023], noop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Do/parallel", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for i := int(n.Add(1)); pb.Next(); i++ {
				if err := m.router.Do(ctx, keys[i&1023], noop); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// Do with a TracerProvider (the SDK, spans exported synchronously to
	// nothing): "Do" above is the same call without one.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	traced, err := router.New(m.node, router.Config{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	defer traced.Close()
	b.Run("Do/traced", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if err := traced.Do(ctx, keys[i&1023], noop); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkForwarding compares a request sent to the key's owner with one
// sent to another node, which forwards it, over HTTP on loopback. The
// forwarded/direct ratio is logged.
func BenchmarkForwarding(b *testing.B) {
	etcd := cluster.New(b, 1)
	f := newFleet(b, etcd, "bench-forward", fleetOptions{Partitions: 64})
	f.start("a")
	f.start("b")
	f.waitStable()
	key := "forward-key"
	owner, other := f.owner(key), f.nonOwner(key)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(b *testing.B, addr string) {
		resp, err := hc.Get("http://" + addr + "/k/" + key)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	ns := map[string]float64{}
	for _, tc := range []struct{ name, addr string }{{"direct", owner.addr}, {"forwarded", other.addr}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				get(b, tc.addr)
			}
			ns[tc.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if ns["direct"] > 0 {
		b.Logf("forwarded/direct = %.2f (%.0f ns / %.0f ns)", ns["forwarded"]/ns["direct"], ns["forwarded"], ns["direct"])
	}
}

// BenchmarkFencedWrites compares, on the same 3-member etcd with 16
// workers, single-writer routing with a per-operation etcd lock
// (concurrency.Mutex: Lock, Put, Unlock), over 64 keys and on one hot key:
//
//   - routed: Do on the key's owner, then one etcd transaction guarded by
//     the owner's claim (etcdfence.ClaimGuarded): it lands only while the
//     claim that issued the token stands.
//   - routed-batched: Do on the key's owner, then a write through the
//     owner's etcdfence.Batcher, which group-commits the fenced writes its
//     node issues concurrently (floor-based etcdfence.Store, advanced by
//     each new owner). Only a single writer can batch like this: with a
//     lock per operation every write needs its own lock round trips.
//   - mutex: concurrency.NewMutex(session, key): Lock, Put, Unlock.
//   - plain-put: an unfenced, unrouted Put, the ceiling for routed.
//
// One op is one round: each implementation in turn, in rotating order so
// that a noisy machine slows all alike, runs its workers for round. The
// benchmark reports each one's throughput and their ratios.
func BenchmarkFencedWrites(b *testing.B) {
	const workers, round = 16, 300 * time.Millisecond
	const name = "bench-fenced"
	etcd := cluster.New(b, 3)
	cli := etcd.NewClient(b)
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name, Prefix: "/bench/batched/"})
	if err != nil {
		b.Fatal(err)
	}
	f := newFleet(b, etcd, name, fleetOptions{Partitions: 64, Fencers: []fence.Fencer{store}})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	layout := keys.New(name)
	routers := f.list()
	batchers := map[*router.Router]*etcdfence.Batcher{}
	for _, m := range routers {
		bt, err := etcdfence.NewBatcher(store, etcdfence.DefaultBatcherConfig())
		if err != nil {
			b.Fatal(err)
		}
		defer bt.Close()
		batchers[m.router] = bt
	}
	ownerOf := func(key string) *router.Router {
		for _, m := range routers {
			if m.node.Lookup(key).Local {
				return m.router
			}
		}
		return routers[0].router
	}
	ctx := context.Background()
	sessions := make([]*concurrency.Session, workers)
	for i := range sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sessions[i] = s
	}

	routed := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			return ownerOf(key).Do(ctx, key, func(ctx context.Context, t fence.Token) error {
				claim := layout.Claim(f.partitionOf(key))
				_, err := etcdfence.ClaimGuarded(ctx, cli, claim, t, clientv3.OpPut("/bench/routed/"+key, strconv.Itoa(i)))
				return err
			})
		}
	}
	batched := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			r := ownerOf(key)
			return r.Do(ctx, key, func(ctx context.Context, t fence.Token) error {
				_, err := batchers[r].Put(ctx, t, key, []byte(strconv.Itoa(i)))
				return err
			})
		}
	}
	plain := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			_, err := cli.Put(ctx, "/bench/plain/"+key, strconv.Itoa(i))
			return err
		}
	}
	mutex := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			m := concurrency.NewMutex(sessions[w], "/bench/lock/"+key)
			if err := m.Lock(ctx); err != nil {
				return err
			}
			if _, err := cli.Put(ctx, "/bench/mutex/"+key, strconv.Itoa(i)); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}
	}

	many := make([]string, 64)
	for i := range many {
		many[i] = "key-" + strconv.Itoa(i)
	}
	hot := []string{"hot"}
	impls := []struct {
		name string
		op   func([]string) func(w, i int) error
	}{{"plain-put", plain}, {"routed", routed}, {"routed-batched", batched}, {"mutex", mutex}}
	for _, set := range []struct {
		name string
		keys []string
	}{{"keys=64", many}, {"hotkey", hot}} {
		b.Run(set.name, func(b *testing.B) {
			rot := workload.Rotation{}
			for _, impl := range impls {
				rot.Ways = append(rot.Ways, workload.Way{Name: impl.name, Workers: workers, Per: 1, Op: impl.op(set.keys)})
			}
			for b.Loop() {
				if err := rot.Round(round); err != nil {
					b.Fatal(err)
				}
			}
			for k, way := range rot.Ways {
				b.ReportMetric(rot.PerSecond(k), way.Name+"-ops/s")
			}
			var cm, wr, al uint64
			for _, bt := range batchers {
				st := bt.Stats()
				cm, wr, al = cm+st.Commits, wr+st.Writes, al+st.Alone
			}
			b.ReportMetric(float64(wr)/float64(cm), "writes/commit")
			b.ReportMetric(float64(al)/float64(cm), "alone/commit")
			b.ReportMetric(rot.PerSecond(1)/rot.PerSecond(3), "routed/mutex")
			b.ReportMetric(rot.PerSecond(2)/rot.PerSecond(3), "batched/mutex")
			b.ReportMetric(rot.PerSecond(2)/rot.PerSecond(1), "batched/routed")
			b.ReportMetric(rot.PerSecond(1)/rot.PerSecond(0), "routed/plain")
		})
	}
}
