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
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeUnderLoad changes the shape of a grpccounter fleet while Add
// calls run through a grpcroute.Conn: three processes with the SQL store
// (--db), group commit and the warm handoff (--prepare) on, the partition
// count 64 -> 256 -> 1,024 -> 256, then the ring algorithm from
// count-only (bounded) to weighted, driven through a fleet.Operator. A
// key's partition changes with the count (under 2P, p splits into p and
// p+P), so each new partition's owner loads keys that other partitions
// wrote. No call fails at the caller, every counter holds exactly its
// acknowledged increments (read through the client and in the database),
// and every acknowledged call's idempotency key is applied once, to its
// key, with the value its reply carried; the test reports, per change,
// the calls' latency beside the steady state before the changes, how
// long the change took and its etcd writes, and the loads from SQL.
//
// It runs on SQLite and on PostgreSQL (the server of TENURE_PG_DSN; the
// PostgreSQL run is skipped without one, and fails if TENURE_REQUIRE_PG is
// set).
func TestResizeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := proctest.Build(t, "grpccounter")
	for _, d := range []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			if d == sqlfence.Postgres {
				counterdbtest.NeedPG(t)
			}
			resizeUnderLoad(t, bin, d)
		})
	}
}

func resizeUnderLoad(t *testing.T, bin string, d sqlfence.Dialect) {
	const (
		start   = 64
		nkeys   = 256
		workers = 8
		steady  = 3 * time.Second
	)
	name := "grpccounter-resize-" + d.String()
	spec, db, _ := counterdbtest.DB(t, d)
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A fleet of the count-only ring, as one created before the weighted
	// ring was the default.
	_, err := cli.Put(ctx, keys.New(name).Spec(),
		fmt.Sprintf(`{"partitions":%d,"load_factor":%v,"ring_algorithm":%d}`, start, ring.DefaultConfig().LoadFactor, ring.AlgorithmBounded))
	require.NoError(t, err)
	ids := []string{"a", "b", "c"}
	var procs []*proctest.Proc
	for _, id := range ids {
		procs = append(procs, proctest.Start(t, bin, id, "--etcd", strings.Join(etcd.Endpoints(), ","), "--cluster", name,
			"--partitions", fmt.Sprint(start), "--ttl", "2s", "--db", spec, "--group-commit=true", "--prepare=true"))
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
		mu      sync.Mutex
		phase   = "steady"
		acked   = map[string]int64{}
		replies = map[string]reply{} // idempotency key -> the acknowledged call's key and value
		lat     = map[string][]time.Duration{}
		errs    []string
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		phases  []string
	)
	setPhase := func(p string) { mu.Lock(); phase = p; mu.Unlock() }
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
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
				idem := fmt.Sprintf("w%d-%d", w, i)
				cctx = metadata.AppendToOutgoingContext(cctx, grpcroute.MetadataIdempotencyKey, idem)
				r, err := counter.Add(cctx, &counterpb.AddRequest{Key: key, Delta: 1})
				ccancel()
				d := time.Since(began)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s phase: Add %s: %v", ph, key, err))
				} else {
					acked[key]++
					replies[idem] = reply{key, r.Value}
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

	require.Empty(t, errs, "calls failed at the caller")
	var total int64
	for key, n := range acked {
		reply, err := counter.Get(ctx, &counterpb.GetRequest{Key: key})
		require.NoError(t, err)
		require.Equal(t, n, reply.Value, "counter %s: acknowledged increments", key)
		total += n
	}
	loads := counterdbtest.Loads(procs)
	for _, p := range procs {
		p.Stop(t)
	}
	checkDB(t, acked, replies, counterdbtest.Counters(t, db), counterdbtest.Applied(t, db))
	t.Logf("%s: %d processes, %d keys, %d workers; %d increments acknowledged; 0 failed at the caller; steady (%v before the changes): Add %s\n%s\n  loads from SQL: %.0f full (after a claim, cold: every partition a resize creates), %.0f catch-up (warm), %.0f preparations; planned moves with a prepare phase: %.0f warm, %.0f cold; %.0f commits and %.0f loads failed (their partitions loaded again, the calls retried)",
		d, len(procs), nkeys, workers, total, steady, summary("steady"), strings.Join(phases, "\n"),
		loads["full"], loads["catchup"], loads["prepare"], loads["moves_warm"], loads["moves_cold"], loads["commit_failures"], loads["load_failures"])
}

// reply is an acknowledged Add of one: its key and the value it answered.
type reply struct {
	key   string
	value int64
}

// checkDB checks the database against the acknowledged calls: each
// counter holds its key's acknowledged increments and no other counter
// has a value; every acknowledged idempotency key is applied once, to its
// key, with the value its reply carried; nothing else is applied.
func checkDB(t *testing.T, acked map[string]int64, replies map[string]reply, counters map[string]int64, applied map[string]counterdb.AppliedRow) {
	t.Helper()
	for key, n := range acked {
		if counters[key] != n {
			t.Errorf("counter %s = %d in the database, %d increments acknowledged", key, counters[key], n)
		}
	}
	for key, v := range counters {
		if _, ok := acked[key]; !ok {
			t.Errorf("counter %s = %d in the database, no increment acknowledged", key, v)
		}
	}
	for idem, r := range applied {
		a, ok := replies[idem]
		switch {
		case !ok:
			t.Errorf("call %s of %s (value %d, by %s at epoch %d) applied but never acknowledged", idem, r.Key, r.Value, r.Node, r.Epoch)
		case a.key != r.Key || a.value != r.Value:
			t.Errorf("call %s applied to %s with value %d, acknowledged for %s with value %d", idem, r.Key, r.Value, a.key, a.value)
		}
	}
	for idem, a := range replies {
		if _, ok := applied[idem]; !ok {
			t.Errorf("call %s of %s acknowledged but not in the database", idem, a.key)
		}
	}
	var sum int64
	for _, v := range counters {
		sum += v
	}
	t.Logf("database: %d counters summing to %d, %d calls applied, %d acknowledged", len(counters), sum, len(applied), len(replies))
}
