package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeUnderLoad changes the shape of a grpccounter fleet while Add
// calls run through a grpcroute.Conn: three processes, the partition
// count 64 -> 256 -> 1,024 -> 256, then the ring algorithm from
// count-only (bounded) to weighted, driven through a fleet.Operator. The
// grpccounter keeps each counter in an etcd key of its own, written under
// its partition's token through etcdfence, and nothing per partition in
// memory, so a key's partition changing needs nothing of it. No call
// fails at the caller and every counter holds exactly its acknowledged
// increments; the test reports, per change, the calls' latency beside
// the steady state before the changes, how long the change took and its
// etcd writes.
func TestResizeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	const (
		name    = "grpccounter-resize"
		start   = 64
		nkeys   = 256
		workers = 8
		steady  = 3 * time.Second
	)
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A fleet of the count-only ring, as one created before the weighted
	// ring was the default.
	_, err := cli.Put(ctx, keys.New(name).Spec(),
		fmt.Sprintf(`{"partitions":%d,"load_factor":%v,"ring_algorithm":%d}`, start, ring.DefaultConfig().LoadFactor, ring.AlgorithmBounded))
	require.NoError(t, err)
	bin := proctest.Build(t, "grpccounter")
	ids := []string{"a", "b", "c"}
	var procs []*proctest.Proc
	for _, id := range ids {
		procs = append(procs, proctest.Start(t, bin, id, "--etcd", strings.Join(etcd.Endpoints(), ","), "--cluster", name,
			"--partitions", fmt.Sprint(start), "--ttl", "2s"))
	}
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	settled := func(count int) {
		t.Helper()
		proctest.WaitFor(t, fmt.Sprintf("every partition of %d served by %v", count, ids), func() bool {
			rs, err := op.ResizeStatus(ctx)
			if err != nil || rs.InProgress || rs.Partitions != count {
				return false
			}
			ps, err := op.Partitions(ctx)
			if err != nil || len(ps) != count {
				return false
			}
			for _, p := range ps {
				if p.Epoch == 0 || p.Handoff || !slices.Contains(ids, p.Owner) {
					return false
				}
			}
			return true
		}, procs...)
	}
	settled(start)

	counter, closeClient, err := dial(cli, name, 2*time.Second)
	require.NoError(t, err)
	defer closeClient()

	var (
		mu     sync.Mutex
		phase  = "steady"
		acked  = map[string]int64{}
		lat    = map[string][]time.Duration{}
		errs   []string
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		phases []string
	)
	setPhase := func(p string) { mu.Lock(); phase = p; mu.Unlock() }
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%d", rand.IntN(nkeys))
				mu.Lock()
				ph := phase
				mu.Unlock()
				began := time.Now()
				cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
				_, err := counter.Add(cctx, &counterpb.AddRequest{Key: key, Delta: 1})
				ccancel()
				d := time.Since(began)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s phase: Add %s: %v", ph, key, err))
				} else {
					acked[key]++
					lat[ph] = append(lat[ph], d)
				}
				mu.Unlock()
			}
		})
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()
	summary := func(ph string) string {
		mu.Lock()
		ds := slices.Clone(lat[ph])
		mu.Unlock()
		if len(ds) == 0 {
			return "n=0"
		}
		slices.Sort(ds)
		at := func(q float64) time.Duration {
			return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(10 * time.Microsecond)
		}
		return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(ds), at(0.50), at(0.99), ds[len(ds)-1].Round(10*time.Microsecond))
	}
	writes := proctest.WatchWrites(t, cli, fleet.DefaultPrefix(name))
	revision := func() int64 { return writes.Revision(t) }
	time.Sleep(steady)

	who := fleet.Action{Actor: "test", Reason: "TestResizeUnderLoad"}
	for _, c := range []struct {
		name          string
		count, budget int // count 0: the migration to the weighted ring
	}{{"64->256", 256, 16}, {"256->1024", 1024, 64}, {"1024->256", 256, 64}, {"bounded->weighted", 0, 32}} {
		setPhase(c.name)
		began := time.Now()
		from := revision()
		var driver string
		var took time.Duration
		count := c.count
		if c.count != 0 {
			rep, err := op.Resize(ctx, c.count, fleet.ResizeOptions{Actor: who.Actor, Reason: who.Reason, Budget: c.budget})
			require.NoError(t, err)
			require.True(t, rep.Completed)
			took = time.Duration(rep.Took)
			driver = fmt.Sprintf("%d groups, %d moves, %d driver writes", rep.Groups, rep.Moves, rep.Writes)
		} else {
			count = 256
			plan, err := op.MigrateAlgorithm(ctx, fleet.Migration{Target: ring.AlgorithmWeighted, Budget: c.budget, DryRun: true}, who)
			require.NoError(t, err)
			from = revision()
			m, err := op.MigrateAlgorithm(ctx, fleet.Migration{Target: ring.AlgorithmWeighted, Budget: c.budget}, who)
			require.NoError(t, err)
			require.True(t, m.Done)
			took = time.Since(began)
			driver = fmt.Sprintf("%d moves planned (dry run), %d steps of at most %d", plan.Moves, m.Steps, c.budget)
		}
		to := revision()
		settled(count)
		all := time.Since(began)
		phases = append(phases, fmt.Sprintf("  %-18s took %v (served everywhere after %v); %s; %d etcd revisions under the fleet's prefix (driver and nodes); Add %s",
			c.name, took.Round(time.Millisecond), all.Round(time.Millisecond), driver, writes.Between(t, from, to), summary(c.name)))
	}
	setPhase("after")
	time.Sleep(time.Second)
	stopLoad()

	mu.Lock()
	require.Empty(t, errs, "calls failed at the caller")
	mu.Unlock()
	var total int64
	for key, n := range acked {
		reply, err := counter.Get(ctx, &counterpb.GetRequest{Key: key})
		require.NoError(t, err)
		require.Equal(t, n, reply.Value, "counter %s: acknowledged increments", key)
		total += n
	}
	t.Logf("%d processes, %d keys, %d workers; %d increments acknowledged, each counted once; 0 failed at the caller; steady (%v before the changes): Add %s\n%s",
		len(procs), nkeys, workers, total, steady, summary("steady"), strings.Join(phases, "\n"))
	for _, p := range procs {
		p.Stop(t)
	}
}
