package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeUnderLoad changes the shape of a counter fleet while it
// serves: three processes (SQL store, group commit, warm handoff on),
// keyed increments through a router.Client, and, driven through a
// fleet.Operator from the test, the partition count 64 -> 256 -> 1,024 ->
// 256, then the ring algorithm from count-only (bounded) to weighted. A
// key's partition changes with the count (under 2P, p splits into p and
// p+P), so each new partition's owner loads keys that other partitions
// wrote. It checks that no increment failed at the client, that every
// acknowledged increment is counted exactly once in the database, and
// that after each change the client names each key's partition by the
// new count; it reports, per phase, the increments' latency beside the
// steady state before the changes, how long the change took and its etcd
// writes.
//
// It runs on SQLite and on PostgreSQL (the server of TENURE_PG_DSN; the
// PostgreSQL run is skipped without one, and fails if TENURE_REQUIRE_PG is
// set).
func TestResizeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := proctest.Build(t, "counter")
	for _, d := range []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			if d == sqlfence.Postgres {
				counterdbtest.NeedPG(t)
			}
			resizeUnderLoad(t, bin, d)
		})
	}
}

// A shape change of TestResizeUnderLoad: a resize to count, or (count 0)
// the migration to the weighted ring.
type shapeChange struct {
	name   string
	count  int
	budget int // groups per step of a resize; partitions per step of a migration
}

func resizeUnderLoad(t *testing.T, bin string, d sqlfence.Dialect) {
	const (
		start   = 64
		nkeys   = 512
		workers = 8
		steady  = 3 * time.Second
	)
	changes := []shapeChange{
		{"64->256", 256, 16},
		{"256->1024", 1024, 64},
		{"1024->256", 256, 64},
		{"bounded->weighted", 0, 32},
	}
	etcd := cluster.New(t, 1)
	spec, db, _ := counterdbtest.DB(t, d)
	clusterName := "counter-resize-" + d.String()
	cli := etcd.NewClient(t)
	// A fleet of the count-only ring, as one created before the weighted
	// ring was the default (a new fleet records the weighted one).
	if _, err := cli.Put(context.Background(), keys.New(clusterName).Spec(),
		fmt.Sprintf(`{"partitions":%d,"load_factor":%v,"ring_algorithm":%d}`, start, ring.DefaultConfig().LoadFactor, ring.AlgorithmBounded)); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", clusterName,
		"--partitions", fmt.Sprint(start), "--ttl", testTTL.String(), "--prepare=true", "--group-commit=true",
	}
	procs := []*proctest.Proc{
		proctest.Start(t, bin, "n1", args...),
		proctest.Start(t, bin, "n2", args...),
		proctest.Start(t, bin, "n3", args...),
	}
	client := newTestClient(t, etcd.NewClient(t), clusterName)
	waitSettledN(t, client, start, procs...)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: clusterName})
	if err != nil {
		t.Fatal(err)
	}
	writes := proctest.WatchWrites(t, cli, fleet.DefaultPrefix(clusterName))

	l := newLoad(client)
	lat := &phaseSamples{by: map[string][]sample{}}
	l.run(workers, func(w, i int) {
		phase := *l.phase.Load()
		began := time.Now()
		l.incr(fmt.Sprintf("key-%d", rand.IntN(nkeys)), fmt.Sprintf("w%d-%d", w, i))
		lat.add(phase, sample{began: began, took: time.Since(began)})
	})
	defer l.finish()
	time.Sleep(steady)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	who := fleet.Action{Actor: "test", Reason: "TestResizeUnderLoad"}
	var lines []string
	for _, c := range changes {
		l.setPhase(c.name)
		began := time.Now()
		from := writes.Revision(t)
		var took time.Duration
		var driver string
		if c.count != 0 {
			rep, err := op.Resize(ctx, c.count, fleet.ResizeOptions{Actor: who.Actor, Reason: who.Reason, Budget: c.budget})
			if err != nil || !rep.Completed {
				t.Fatalf("resize %s: %+v, %v", c.name, rep, err)
			}
			took = time.Duration(rep.Took)
			driver = fmt.Sprintf("%d groups, %d moves, %d driver writes", rep.Groups, rep.Moves, rep.Writes)
		} else {
			mig := fleet.Migration{Target: ring.AlgorithmWeighted, Budget: c.budget}
			dry := mig
			dry.DryRun = true
			plan, err := op.MigrateAlgorithm(ctx, dry, who)
			if err != nil {
				t.Fatalf("migration %s, dry run: %v", c.name, err)
			}
			from = writes.Revision(t)
			m, err := op.MigrateAlgorithm(ctx, mig, who)
			if err != nil || !m.Done {
				t.Fatalf("migration %s: %+v, %v", c.name, m, err)
			}
			took = time.Since(began)
			driver = fmt.Sprintf("%d moves planned (dry run), %d steps of at most %d", plan.Moves, m.Steps, c.budget)
		}
		to := writes.Revision(t)
		count := c.count
		if count == 0 {
			count = 256
		}
		waitSettledN(t, client, count, procs...)
		settled := time.Since(began)
		waitAgree(t, client, count)
		s := lat.summary(c.name)
		lines = append(lines, fmt.Sprintf("  %-18s took %v (served everywhere after %v); %s; %d etcd revisions under the fleet's prefix (driver and nodes); increments %s",
			c.name, took.Round(time.Millisecond), settled.Round(time.Millisecond), driver, writes.Between(t, from, to), s))
	}
	l.setPhase("after")
	time.Sleep(time.Second)
	l.finish()

	for _, e := range l.errs {
		t.Errorf("%s phase: increment %s of %s failed at %s: %s", e.phase, e.idem, e.key, e.at.Format("15:04:05.000"), e.err)
	}
	if len(l.lost) > 0 {
		t.Errorf("%d increments never acknowledged", len(l.lost))
	}
	for _, b := range l.badResends {
		t.Errorf("resent increment not answered as a duplicate with its first value: %s", b)
	}
	loads := counterdbtest.Loads(procs)
	for _, p := range procs {
		p.Stop(t)
	}
	checkCounts(t, l, counterdbtest.Counters(t, db), counterdbtest.Applied(t, db))
	steadyLat := lat.summary(phaseSteady)
	t.Logf("%s: %d processes, %d keys, %d workers; steady (%v before the changes): increments %s\n%s\n  loads from SQL: %.0f full (after a claim, cold: every partition a resize creates), %.0f catch-up (warm), %.0f preparations; planned moves with a prepare phase: %.0f warm, %.0f cold; %.0f commits and %.0f loads failed (their partitions loaded again, the increments retried); %d failed at the client",
		d, len(procs), nkeys, workers, steady, steadyLat, strings.Join(lines, "\n"), loads["full"], loads["catchup"], loads["prepare"], loads["moves_warm"], loads["moves_cold"],
		loads["commit_failures"], loads["load_failures"], len(l.errs))
}

// waitAgree waits until the client names, for a sample of keys, the
// partition of the key under count partitions, claimed.
func waitAgree(t *testing.T, c *router.Client, count int) {
	t.Helper()
	proctest.WaitFor(t, fmt.Sprintf("the client routing by %d partitions", count), func() bool {
		for i := range 256 {
			key := fmt.Sprintf("key-%d", i)
			if r := c.Lookup(key); r.Partition != ring.PartitionOf(key, count) || r.Epoch == 0 {
				return false
			}
		}
		return true
	})
}

// phaseSamples are the increments' latencies by the phase they began in.
type phaseSamples struct {
	mu sync.Mutex
	by map[string][]sample
}

func (l *phaseSamples) add(phase string, s sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.by[phase] = append(l.by[phase], s)
}

// summary summarizes the latencies of the increments begun in phase.
func (l *phaseSamples) summary(phase string) latencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := span{to: time.Unix(1<<62, 0)}
	return summarize(l.by[phase], all)
}
