package etcdfence_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/workload"
	"github.com/tenure-go/tenure/sim/cluster"
)

// memberCPUs moves the benchmarks' etcd members out of the test process,
// into processes confined to these CPUs (cluster.Config.MemberCPUs). Run
// the test binary under taskset on the other CPUs, and etcd no longer
// shares CPUs or a Go scheduler with the client, as in production:
//
//	taskset -c 0 go test -run '^$' -bench BenchmarkCeiling16 ./fence/etcdfence/ -args -etcd.cpus 1
var memberCPUs = flag.String("etcd.cpus", "", "run the benchmarks' etcd members as processes on these CPUs (a taskset -c list)")

// benchMembers runs bench on a 1-member and on a 3-member etcd (the size of
// a production cluster), as sub-benchmarks "m1" and "m3": embedded in the
// test process, or in processes of their own with -etcd.cpus.
func benchMembers(b *testing.B, bench func(b *testing.B, cli *clientv3.Client)) {
	for _, members := range []int{1, 3} {
		b.Run(fmt.Sprintf("m%d", members), func(b *testing.B) {
			cfg := cluster.DefaultConfig()
			cfg.Members = members
			if *memberCPUs != "" {
				cfg.Processes, cfg.MemberCPUs = true, *memberCPUs
			}
			bench(b, cluster.NewWithConfig(b, cfg).NewClient(b))
		})
	}
}

// BenchmarkPut compares, side by side on one etcd, a fenced Put with a
// plain etcd Put of the same key and value ("plain"), and with a plain Put
// wrapped in a transaction ("plain-txn"), which isolates the cost of the
// fence from the cost of using a transaction at all.
func BenchmarkPut(b *testing.B) { benchMembers(b, benchPut) }

func benchPut(b *testing.B, cli *clientv3.Client) {
	ctx := context.Background()
	s := newStore(b, cli, "bench-put")
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	if err := s.Advance(ctx, tok); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	value := []byte("a value of some thirty-two bytes")
	prefix := etcdfence.DataPrefix(s)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := cli.Put(ctx, prefix+keys[i%len(keys)], string(value)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-txn", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := cli.Txn(ctx).Then(clientv3.OpPut(prefix+keys[i%len(keys)], string(value))).Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fenced", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := s.Put(ctx, tok, keys[i%len(keys)], value); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWriters16 compares 16 concurrent writers, each owning its own
// partition, writing fenced Puts one transaction each ("single") and
// through a Batcher ("grouped"). ns/op is wall time per write: the inverse
// of throughput. "unfenced-txn16" bounds what any grouping can reach on this
// etcd: one goroutine writing plain Puts, 16 to a transaction, no fence.
// "commit16" is the same goroutine writing the same 16 fenced writes with
// Store.Commit: what grouping reaches without the gathering.
// "hotkey/single" and "hotkey/grouped" are the same 16 writers putting
// one key under one owner's token, the worst case for batching: writes to
// one key never share a transaction.
func BenchmarkWriters16(b *testing.B) { benchMembers(b, benchWriters16) }

func benchWriters16(b *testing.B, cli *clientv3.Client) {
	const writers = 16
	ctx := context.Background()
	s := newStore(b, cli, "bench-writers")
	value := []byte("a value of some thirty-two bytes")
	// run runs b.N puts on writers goroutines; writer w puts key(w, i)
	// under token(w).
	run := func(b *testing.B, token func(w int) fence.Token, key func(w, i int) string, put func(fence.Token, string) error) {
		b.ReportAllocs()
		b.ResetTimer()
		var wg sync.WaitGroup
		for w := range writers {
			n := b.N / writers
			if w < b.N%writers {
				n++
			}
			wg.Go(func() {
				tok := token(w)
				for i := range n {
					if err := put(tok, key(w, i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	ownScope := func(w int) fence.Token { return fence.Token{Scope: fence.PartitionScope(w), Epoch: 1} }
	ownKeys := func(w, i int) string { return fmt.Sprintf("w%d/k%d", w, i%256) }
	hotScope := func(int) fence.Token { return fence.Token{Scope: fence.PartitionScope(writers), Epoch: 1} }
	hotKey := func(int, int) string { return "hot" }
	single := func(t fence.Token, key string) error {
		_, err := s.Put(ctx, t, key, value)
		return err
	}
	grouped := func(b *testing.B, token func(int) fence.Token, key func(w, i int) string, cfg etcdfence.BatcherConfig) {
		bt, err := etcdfence.NewBatcher(s, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer bt.Close()
		run(b, token, key, func(t fence.Token, key string) error {
			_, err := bt.Put(ctx, t, key, value)
			return err
		})
		b.StopTimer()
		if st := bt.Stats(); st.Commits > 0 {
			b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
			b.ReportMetric(float64(st.Alone)/float64(st.Commits), "alone/commit")
		}
	}
	b.Run("single", func(b *testing.B) { run(b, ownScope, ownKeys, single) })
	b.Run("unfenced-txn16", func(b *testing.B) {
		b.ReportAllocs()
		ops := make([]clientv3.Op, writers)
		prefix := etcdfence.DataPrefix(s)
		for i := 0; i < b.N; i += writers {
			for w := range ops {
				ops[w] = clientv3.OpPut(fmt.Sprintf("%sw%d/k%d", prefix, w, (i/writers)%256), string(value))
			}
			if _, err := cli.Txn(ctx).Then(ops[:min(writers, b.N-i)]...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("commit16", func(b *testing.B) {
		b.ReportAllocs()
		writes := make([]etcdfence.Write, writers)
		for i := 0; i < b.N; i += writers {
			for w := range writes {
				writes[w] = etcdfence.Write{Kind: etcdfence.KindPut, Token: ownScope(w), Key: ownKeys(w, i/writers), Value: value}
			}
			if _, err := s.Commit(ctx, writes[:min(writers, b.N-i)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("grouped", func(b *testing.B) { grouped(b, ownScope, ownKeys, etcdfence.BatcherConfig{}) })
	b.Run("hotkey/single", func(b *testing.B) { run(b, hotScope, hotKey, single) })
	b.Run("hotkey/grouped", func(b *testing.B) { grouped(b, hotScope, hotKey, etcdfence.BatcherConfig{}) })
}

// BenchmarkCeiling16 runs three ways of writing 16 writers' Puts in
// alternating timed rounds of 100ms each, so that a noisy machine slows all
// three alike, and reports their time per write and the ratios of their
// throughputs:
//
//   - unfenced: one goroutine, plain Puts 16 to a transaction (the ceiling
//     of any grouping on this etcd);
//   - commit16: one goroutine, the same 16 Puts fenced, with Store.Commit
//     (the ceiling of fenced grouping: the fence's own cost);
//   - grouped: 16 writers, each in its own partition, through a Batcher;
//   - unfenced-grouped: the same 16 writers through a Batcher of a Store
//     that checks and records no floor (the same group commit, hand-off
//     included, without the fence), so that grouped/unfenced-grouped is
//     the fence's own cost.
//
// Timed rounds measure each way in its steady state: a round of a fixed
// number of writes would charge the grouped writers for the ramp and drain
// of their batches at each end. One op is one round of all three.
// grouped-writes/commit is the Batcher's mean batch: below 16, some
// writers were late to submit again and missed the batch (on a machine
// where etcd shares the writers' processors, a writer queued behind etcd's
// goroutines can miss several batches in a row).
func BenchmarkCeiling16(b *testing.B) { benchMembers(b, benchCeiling16) }

func benchCeiling16(b *testing.B, cli *clientv3.Client) {
	const writers, round = 16, 100 * time.Millisecond
	ctx := context.Background()
	s := newStore(b, cli, "bench-ceiling")
	bt, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	value := []byte("a value of some thirty-two bytes")
	prefix := etcdfence.DataPrefix(s)
	token := func(w int) fence.Token { return fence.Token{Scope: fence.PartitionScope(w), Epoch: 1} }
	us := newStore(b, cli, "bench-ceiling-unfenced")
	for w := range writers {
		if err := us.Advance(ctx, token(w)); err != nil {
			b.Fatal(err)
		}
	}
	etcdfence.UnfenceForBench(us)
	ubt, err := etcdfence.NewBatcher(us, etcdfence.BatcherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer ubt.Close()
	key := func(w, i int) string { return fmt.Sprintf("w%d/k%d", w, i%256) }
	ops := make([]clientv3.Op, writers)
	writes := make([]etcdfence.Write, writers)
	rot := workload.Rotation{Ways: []workload.Way{
		{Name: "unfenced", Workers: 1, Per: writers, Op: func(_, i int) error {
			for w := range ops {
				ops[w] = clientv3.OpPut(prefix+key(w, i), string(value))
			}
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return err
		}},
		{Name: "commit16", Workers: 1, Per: writers, Op: func(_, i int) error {
			for w := range writes {
				writes[w] = etcdfence.Write{Kind: etcdfence.KindPut, Token: token(w), Key: key(w, i), Value: value}
			}
			_, err := s.Commit(ctx, writes)
			return err
		}},
		{Name: "grouped", Workers: writers, Per: 1, Op: func(w, i int) error {
			_, err := bt.Put(ctx, token(w), key(w, i), value)
			return err
		}},
		{Name: "unfenced-grouped", Workers: writers, Per: 1, Op: func(w, i int) error {
			_, err := ubt.Put(ctx, token(w), key(w, i), value)
			return err
		}},
	}}
	for b.Loop() {
		if err := rot.Round(round); err != nil {
			b.Fatal(err)
		}
	}
	if st := bt.Stats(); st.Commits > 0 {
		b.ReportMetric(float64(st.Writes)/float64(st.Commits), "grouped-writes/commit")
	}
	for k, way := range rot.Ways {
		b.ReportMetric(1e9/rot.PerSecond(k), way.Name+"-ns/write")
	}
	b.ReportMetric(rot.PerSecond(2)/rot.PerSecond(0), "grouped/unfenced")
	b.ReportMetric(rot.PerSecond(2)/rot.PerSecond(1), "grouped/commit16")
	b.ReportMetric(rot.PerSecond(1)/rot.PerSecond(0), "commit16/unfenced")
	b.ReportMetric(rot.PerSecond(2)/rot.PerSecond(3), "grouped/unfenced-grouped")
}

// BenchmarkFloorChecks measures, side by side on one etcd whose fence
// prefix holds the floors of 1,024 partitions, what each way of checking a
// transaction of 16 Puts in 16 scopes against their floors costs, as
// transactions of one goroutine in alternating timed rounds:
//
//   - none: the Puts alone, unchecked;
//   - value16: one Value comparison per scope, as Commit makes them;
//   - mod16: one ModRevision comparison per scope, which etcd evaluates
//     by reading the floor as it does for value16, with a varint revision
//     for operand instead of a 20-byte bound;
//   - range: one ModRevision comparison over the whole fence prefix, which
//     etcd evaluates by reading every key in the range;
//   - key1: one ModRevision comparison on one key, which checks no floor
//     any other writer may raise.
//
// It reports each way's time per transaction and its throughput relative
// to none.
func BenchmarkFloorChecks(b *testing.B) { benchMembers(b, benchFloorChecks) }

func benchFloorChecks(b *testing.B, cli *clientv3.Client) {
	const scopes, partitions, round = 16, 1024, 100 * time.Millisecond
	ctx := context.Background()
	s := newStore(b, cli, "bench-checks")
	for p := range partitions {
		if err := s.Advance(ctx, fence.Token{Scope: fence.PartitionScope(p), Epoch: 1}); err != nil {
			b.Fatal(err)
		}
	}
	fp, prefix := s.FencePrefix(), etcdfence.DataPrefix(s)
	value := "a value of some thirty-two bytes"
	puts := func(i int) []clientv3.Op {
		ops := make([]clientv3.Op, scopes)
		for w := range ops {
			ops[w] = clientv3.OpPut(fmt.Sprintf("%sw%d/k%d", prefix, w, i%256), value)
		}
		return ops
	}
	// scope w of round i is one of 16 partitions spread over the range.
	scope := func(w, i int) string { return fence.PartitionScope((w*partitions/scopes + i) % partitions) }
	way := func(name string, cmps func(i int) []clientv3.Cmp) workload.Way {
		return workload.Way{Name: name, Workers: 1, Per: 1, Op: func(_, i int) error {
			resp, err := cli.Txn(ctx).If(cmps(i)...).Then(puts(i)...).Commit()
			if err == nil && !resp.Succeeded {
				err = fmt.Errorf("%s: checks failed", name)
			}
			return err
		}}
	}
	bound := []byte("0000000000000000001\x00")
	// cmp builds a comparison as the Store does, without the deep copy
	// clientv3.Compare makes.
	cmp := func(key, end string, result pb.Compare_CompareResult, target pb.Compare_CompareTarget, union any) clientv3.Cmp {
		var c clientv3.Cmp
		pc := c.GetCompare()
		pc.Key, pc.Result, pc.Target = []byte(key), result, target
		if end != "" {
			pc.RangeEnd = []byte(end)
		}
		switch u := union.(type) {
		case []byte:
			pc.TargetUnion = &pb.Compare_Value{Value: u}
		case int64:
			pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: u}
		}
		return c
	}
	floors, err := cli.Get(ctx, fp, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		b.Fatal(err)
	}
	var high int64
	mods := make(map[string]int64, len(floors.Kvs))
	for _, kv := range floors.Kvs {
		mods[string(kv.Key[len(fp):])] = kv.ModRevision
		high = max(high, kv.ModRevision)
	}
	rot := workload.Rotation{Ways: []workload.Way{
		way("none", func(int) []clientv3.Cmp { return nil }),
		way("value16", func(i int) []clientv3.Cmp {
			cmps := make([]clientv3.Cmp, scopes)
			for w := range cmps {
				cmps[w] = cmp(fp+scope(w, i), "", pb.Compare_LESS, pb.Compare_VALUE, bound)
			}
			return cmps
		}),
		way("mod16", func(i int) []clientv3.Cmp {
			cmps := make([]clientv3.Cmp, scopes)
			for w := range cmps {
				key := scope(w, i)
				cmps[w] = cmp(fp+key, "", pb.Compare_EQUAL, pb.Compare_MOD, mods[key])
			}
			return cmps
		}),
		way("range", func(int) []clientv3.Cmp {
			return []clientv3.Cmp{cmp(fp, clientv3.GetPrefixRangeEnd(fp), pb.Compare_LESS, pb.Compare_MOD, high+1)}
		}),
		way("key1", func(int) []clientv3.Cmp {
			return []clientv3.Cmp{cmp(fp+fence.PartitionScope(0), "", pb.Compare_LESS, pb.Compare_MOD, high+1)}
		}),
	}}
	for b.Loop() {
		if err := rot.Round(round); err != nil {
			b.Fatal(err)
		}
	}
	for k, w := range rot.Ways {
		b.ReportMetric(1e9/rot.PerSecond(k), w.Name+"-ns/txn")
		if k > 0 {
			b.ReportMetric(rot.PerSecond(k)/rot.PerSecond(0), w.Name+"/none")
		}
	}
}
