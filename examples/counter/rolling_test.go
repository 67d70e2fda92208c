package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Phases of TestRollingRestartWarm.
const (
	phaseMoves = "moves" // from a process's SIGTERM until the fleet of three serves everything again
	phaseAfter = "after" // the 2s after each restart, before the next; steady state too
)

// TestRollingRestartWarm measures the warm handoff on the counter: three
// processes, thousands of counters per partition in the database (so that
// a cold load costs something), keyed increments through a router.Client,
// and every process restarted one after another (SIGTERM, start again),
// once with --prepare (the next owner loads a partition while the
// previous one serves it, and catches up after its claim) and once
// without, in the same run. It reports the latency of the increments
// (p50, p99, max) in steady state and during the moves (from a SIGTERM
// until the fleet serves everything again: a window so short that its p99
// is mostly the calls that met a handoff), over the rolling restart as a
// whole (the moves and the 2s after each) against the steady state before
// it, and the loads from SQL after acquisition; it checks that no
// increment failed at the client and that every acknowledged increment
// counts once.
//
// It runs on SQLite and on PostgreSQL (the server of TENURE_PG_DSN; the
// PostgreSQL runs are skipped without one, and fail if TENURE_REQUIRE_PG
// is set). TENURE_ROLLING_SEED sets the counters per partition (default
// 4000).
func TestRollingRestartWarm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	seed := 4000
	if s := os.Getenv("TENURE_ROLLING_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	bin := proctest.Build(t, "counter")
	for _, d := range []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			if d == sqlfence.Postgres && os.Getenv(envPG) == "" {
				if v := os.Getenv("TENURE_REQUIRE_PG"); v != "" && v != "0" {
					t.Fatal("TENURE_REQUIRE_PG is set but TENURE_PG_DSN names no PostgreSQL server")
				}
				t.Skip("no PostgreSQL: set TENURE_PG_DSN to a postgres:// URL of a server the test may create databases on")
			}
			for _, prepare := range []bool{true, false} {
				t.Run(fmt.Sprintf("prepare=%v", prepare), func(t *testing.T) { rollingRestart(t, bin, d, prepare, seed) })
			}
		})
	}
}

func rollingRestart(t *testing.T, bin string, d sqlfence.Dialect, prepare bool, seed int) {
	etcd := cluster.New(t, 1)
	spec, db, dialect := testDB(t, d)
	clusterName := fmt.Sprintf("counter-rolling-%s-%v", d, prepare)
	args := []string{
		"--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", clusterName,
		"--partitions", fmt.Sprint(testPartitions), "--ttl", testTTL.String(), fmt.Sprintf("--prepare=%v", prepare),
	}
	procs := []*proctest.Proc{
		proctest.Start(t, bin, "n1", args...),
		proctest.Start(t, bin, "n2", args...),
		proctest.Start(t, bin, "n3", args...),
	}
	client := newTestClient(t, etcd.NewClient(t), clusterName)
	waitSettled(t, client, procs...)
	seedCounters(t, db, dialect, seed)

	l := &load{client: client, stop: make(chan struct{}), acked: make(map[string]int64), ackedIdem: make(map[string]string)}
	l.setPhase(phaseSteady)
	lat := &latencies{by: map[string][]time.Duration{}}
	for w := range testWorkers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				phase := *l.phase.Load()
				began := time.Now()
				l.incr(fmt.Sprintf("key-%d", rand.IntN(testKeys*4)), fmt.Sprintf("w%d-%d", w, i))
				lat.add(phase, time.Since(began))
			}
		}()
	}
	defer l.finish()
	time.Sleep(3 * time.Second)

	loads := map[string]float64{}
	count := func(p *proctest.Proc) {
		for _, k := range []string{"full", "catchup", "prepare"} {
			v, _ := p.Metric(fmt.Sprintf(`counter_sql_loads_total{kind=%q}`, k))
			loads[k] += v
			r, _ := p.Metric(fmt.Sprintf(`counter_sql_rows_loaded_total{kind=%q}`, k))
			loads[k+"_rows"] += r
		}
	}
	for _, p := range procs {
		count(p) // the loads of the start, before the rolling restart
	}
	for k := range loads {
		loads[k] = -loads[k]
	}
	for i, p := range procs {
		l.setPhase(phaseMoves)
		count(p)
		p.Stop(t)
		procs[i] = proctest.Start(t, bin, p.ID, args...)
		waitSettled(t, client, procs...)
		l.setPhase(phaseAfter)
		time.Sleep(2 * time.Second)
	}
	l.finish()
	for _, p := range procs {
		count(p)
	}
	for _, e := range l.errs {
		t.Errorf("%s phase: increment %s of %s failed at %s: %s", e.phase, e.idem, e.key, e.at.Format("15:04:05.000"), e.err)
	}
	if len(l.lost) > 0 {
		t.Errorf("%d increments never acknowledged", len(l.lost))
	}
	for _, b := range l.badResends {
		t.Errorf("resent increment not answered as a duplicate with its first value: %s", b)
	}
	counters := dbCounters(t, db)
	for k := range counters {
		if strings.HasPrefix(k, "seed-") {
			delete(counters, k)
		}
	}
	checkCounts(t, l, counters, dbApplied(t, db))
	s, m := lat.summary(phaseSteady, phaseAfter), lat.summary(phaseMoves)
	before, whole := lat.summary(phaseSteady), lat.summary(phaseMoves, phaseAfter)
	t.Logf("%s, prepare=%v, %d counters per partition, %d partitions: steady %s; during moves %s; p99 moves/steady %.2f; the rolling restart as a whole (moves and the 2s after each) %s against the %s before it: p99 %.2f; loads from SQL after acquisition: %.0f full (%.0f rows), %.0f catch-up (%.0f rows); %.0f preparations (%.0f rows)",
		d, prepare, seed, testPartitions, s, m, float64(m.p99)/float64(s.p99),
		whole, before, float64(whole.p99)/float64(before.p99),
		loads["full"], loads["full_rows"], loads["catchup"], loads["catchup_rows"], loads["prepare"], loads["prepare_rows"])
}

// seedCounters inserts n counters per partition that the load never
// touches: what a cold load reads.
func seedCounters(t *testing.T, db *sql.DB, d sqlfence.Dialect, n int) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ph := d.Placeholder
	stmt, err := tx.Prepare("INSERT INTO " + countersTable + " (key, partition, value, epoch, seq) VALUES (" + ph(1) + ", " + ph(2) + ", 1, 0, 0)")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	for p := range testPartitions {
		for i := range n {
			if _, err := stmt.Exec(fmt.Sprintf("seed-%d-%d", p, i), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// latencies are the increments' end-to-end latencies (retries included),
// by the phase they began in.
type latencies struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func (l *latencies) add(phase string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.by[phase] = append(l.by[phase], d)
}

type latencySummary struct {
	n             int
	p50, p99, max time.Duration
}

func (s latencySummary) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", s.n, s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond), s.max.Round(10*time.Microsecond))
}

// summary summarizes the latencies of the increments begun in phases.
func (l *latencies) summary(phases ...string) latencySummary {
	l.mu.Lock()
	var ds []time.Duration
	for _, ph := range phases {
		ds = append(ds, l.by[ph]...)
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return latencySummary{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return latencySummary{n: len(ds), p50: at(0.50), p99: at(0.99), max: ds[len(ds)-1]}
}
