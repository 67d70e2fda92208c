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

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Phases of TestRollingRestartWarm, recorded with every failed attempt.
const (
	phaseMoves = "moves" // from a process's SIGTERM until the fleet of three serves everything again
	phaseAfter = "after" // the 2s after each restart, before the next
)

// TestRollingRestartWarm measures the warm handoff as a user feels it over
// a deploy: three counter processes, thousands of counters per partition
// in the database (so that a cold load costs something), keyed increments
// through a router.Client, and every process restarted one after another
// (SIGTERM, start again, wait until the fleet serves everything, 2s,
// the next), once with --prepare (the next owner loads a partition while
// the previous one serves it, and catches up after its claim) and once
// without. It reports the latency of the increments (p50, p99, max) by
// the window they began in:
//
//   - steady: before the first SIGTERM (3s; TENURE_DEPLOY_WINDOWS=1: 30s),
//     with the p99 of each 10s of it (of each half, if shorter than 20s)
//     to show how stable it is;
//   - deploy: from the first SIGTERM until the fleet serves everything
//     after the last restart;
//   - moves: from each SIGTERM until the fleet serves everything again (a
//     window so short that its p99 is mostly the calls that met a
//     handoff);
//   - after: the 2s after the last restart;
//
// and the hit rate of the deploy: the first reads of a counter in a tenure
// served from prepared state (counter_prepared_hits_total) over all of
// them (with counter_cold_reads_total), and the loads from SQL after
// acquisition. It checks that no increment failed at the client, that
// every acknowledged increment counts once, and that the hit counters
// follow --prepare (no hit without it). The last subtest prints the
// figures of every run as one table. TENURE_DEPLOY_TRACE=1 also logs, for
// each restart, when the leaving process exited and the longest time in
// which no increment completed, and the slowest increments around it.
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
	steady := 3 * time.Second
	if envOn("TENURE_DEPLOY_WINDOWS") {
		steady = 30 * time.Second
	}
	bin := proctest.Build(t, "counter")
	var table deployTable
	for _, d := range []sqlfence.Dialect{sqlfence.SQLite, sqlfence.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			if d == sqlfence.Postgres {
				counterdbtest.NeedPG(t)
			}
			for _, prepare := range []bool{true, false} {
				t.Run(fmt.Sprintf("prepare=%v", prepare), func(t *testing.T) {
					table.add(rollingRestart(t, bin, d, prepare, seed, steady))
				})
			}
		})
	}
	t.Logf("the deploy's figures (steady %v, %d counters per partition, %d partitions, %d workers; noisy on a shared machine: compare the ratios of one run)\n%s",
		steady, seed, testPartitions, testWorkers, table.String())
}

// deployUtil returns TENURE_DEPLOY_UTIL, a share in (0, 1]: the rolling
// restart's load is then an open loop (load.runRate) at that share of
// the rate the test's workers sustain in a closed loop, measured first.
// It returns 0 (a closed loop of testWorkers) if unset or not a share.
func deployUtil() float64 {
	var u float64
	if _, err := fmt.Sscan(os.Getenv("TENURE_DEPLOY_UTIL"), &u); err != nil || u <= 0 || u > 1 {
		return 0
	}
	return u
}

// envOn reports whether the environment variable name is set to something
// other than "" or "0".
func envOn(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}

// restart is one process's restart in a rolling restart, by the test's clock.
type restart struct {
	id                    string
	term, exited, settled time.Time // SIGTERM sent; the process exited; the fleet serves everything again
}

func rollingRestart(t *testing.T, bin string, d sqlfence.Dialect, prepare bool, seed int, steady time.Duration) deployRow {
	etcd := cluster.New(t, 1)
	spec, db, dialect := counterdbtest.DB(t, d)
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

	l := newLoad(client)
	for i := range 2 {
		// Every key created, then read, in the tenures of the start,
		// before the counts of first reads below (which count only the
		// keys that have a value).
		for k := range testKeys * 4 {
			l.incr(fmt.Sprintf("key-%d", k), fmt.Sprintf("warm-%d-%d", i, k))
		}
	}
	samples := make([][]sample, testWorkers) // each worker's
	var rate float64
	if util := deployUtil(); util > 0 {
		// An open loop at a share of what testWorkers sustain closed.
		rate = util * l.capacity(testWorkers, 3*time.Second)
		var mu sync.Mutex
		l.runRate(rate, func(i int, at time.Time) {
			l.incr(fmt.Sprintf("key-%d", rand.IntN(testKeys*4)), fmt.Sprintf("r-%d", i))
			mu.Lock()
			samples[i%testWorkers] = append(samples[i%testWorkers], sample{began: at, took: time.Since(at)})
			mu.Unlock()
		})
	} else {
		l.run(testWorkers, func(w, i int) {
			began := time.Now()
			l.incr(fmt.Sprintf("key-%d", rand.IntN(testKeys*4)), fmt.Sprintf("w%d-%d", w, i))
			samples[w] = append(samples[w], sample{began: began, took: time.Since(began)})
		})
	}
	defer l.finish()
	loads := map[string]float64{}
	count := func(p *proctest.Proc) {
		for _, k := range []string{"full", "catchup", "prepare"} {
			v, _ := p.Metric(fmt.Sprintf(`counter_sql_loads_total{kind=%q}`, k))
			loads[k] += v
			r, _ := p.Metric(fmt.Sprintf(`counter_sql_rows_loaded_total{kind=%q}`, k))
			loads[k+"_rows"] += r
		}
		for _, m := range []string{"counter_prepared_hits_total", "counter_cold_reads_total", poolWaits, poolWaitSeconds} {
			v, _ := p.Metric(m)
			loads[m] += v
		}
		if _, err := p.Metric(`go_sql_max_open_connections{db_name="counter"}`); err != nil {
			t.Errorf("%s does not serve its connection pool's metrics: %v", p.ID, err)
		}
	}
	for _, p := range procs {
		count(p) // the loads and reads of the start, before the rolling restart
	}
	for k := range loads {
		loads[k] = -loads[k]
	}
	steadyFrom := time.Now()
	time.Sleep(steady)

	every := slices.Clone(procs) // every process of the run, for its logs
	var restarts []restart
	for i, p := range procs {
		l.setPhase(phaseMoves)
		r := restart{id: p.ID, term: time.Now()}
		count(p)
		p.Stop(t)
		r.exited = time.Now()
		procs[i] = proctest.Start(t, bin, p.ID, args...)
		every = append(every, procs[i])
		waitSettled(t, client, procs...)
		r.settled = time.Now()
		restarts = append(restarts, r)
		l.setPhase(phaseAfter)
		time.Sleep(2 * time.Second)
	}
	end := time.Now()
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
	counters := counterdbtest.Counters(t, db)
	for k := range counters {
		if strings.HasPrefix(k, "seed-") {
			delete(counters, k)
		}
	}
	checkCounts(t, l, counters, counterdbtest.Applied(t, db))
	hits, cold := loads["counter_prepared_hits_total"], loads["counter_cold_reads_total"]
	switch {
	case hits+cold == 0:
		t.Errorf("no first read of a counter after a move counted: counter_prepared_hits_total and counter_cold_reads_total did not rise")
	case !prepare && hits != 0:
		t.Errorf("counter_prepared_hits_total rose by %.0f with --prepare=false", hits)
	case prepare && hits == 0:
		t.Errorf("counter_prepared_hits_total did not rise with --prepare (%.0f cold reads)", cold)
	}

	if prepare && cold > 0 {
		logColdMoves(t, every, restarts[0].term)
	}

	var all []sample
	for _, s := range samples {
		all = append(all, s...)
	}
	deploy := span{restarts[0].term, restarts[len(restarts)-1].settled}
	var moves []span
	for _, r := range restarts {
		moves = append(moves, span{r.term, r.settled})
	}
	row := deployRow{
		dialect: d.String(), prepare: prepare, failed: len(l.errs) + len(l.lost), rate: rate,
		steady:     summarize(all, span{steadyFrom, deploy.from}),
		deploy:     summarize(all, deploy),
		moves:      summarize(all, moves...),
		after:      summarize(all, span{deploy.to, end}),
		deployTook: deploy.to.Sub(deploy.from),
		hitRate:    hits / max(1, hits+cold), hits: hits, cold: cold,
		full: loads["full"], catchup: loads["catchup"],
	}
	if d == sqlfence.Postgres {
		if err := db.QueryRow("SHOW autovacuum_naptime").Scan(&row.naptime); err != nil {
			t.Fatalf("show autovacuum_naptime: %v", err)
		}
	}
	sub := 10 * time.Second
	if steady < 2*sub {
		sub = steady / 2
	}
	for from := steadyFrom; !from.Add(sub).After(deploy.from.Add(sub / 10)); from = from.Add(sub) {
		row.steadyParts = append(row.steadyParts, summarize(all, span{from, from.Add(sub)}).p99)
	}
	t.Logf("%s, prepare=%v: steady %s (p99 by %v: %v); deploy %s (%v); moves %s; after %s; hit rate %.4f (%.0f prepared, %.0f cold); loads from SQL after acquisition: %.0f full (%.0f rows), %.0f catch-up (%.0f rows); %.0f preparations (%.0f rows); %.0f waits for a pooled connection (%.1fms in all)",
		d, prepare, row.steady, sub, row.steadyParts, row.deploy, row.deployTook.Round(time.Millisecond), row.moves, row.after,
		row.hitRate, hits, cold, loads["full"], loads["full_rows"], loads["catchup"], loads["catchup_rows"], loads["prepare"], loads["prepare_rows"],
		loads[poolWaits], loads[poolWaitSeconds]*1000)
	if envOn("TENURE_DEPLOY_TRACE") {
		traceRestarts(t, all, restarts)
	}
	return row
}

// The connection pool's waits, as a counter process serves them
// (counterdb.Metrics.WatchPool).
const (
	poolWaits       = `go_sql_wait_count_total{db_name="counter"}`
	poolWaitSeconds = `go_sql_wait_duration_seconds_total{db_name="counter"}`
)

// seedCounters inserts about n counters per partition that the load
// never touches: what a cold load reads. Each row has its key's slot and
// partition, as the counter writes them.
func seedCounters(t *testing.T, db *sql.DB, d sqlfence.Dialect, n int) {
	t.Helper()
	total := testPartitions * n
	keys, parts, slots := make([]string, total), make([]int64, total), make([]int64, total)
	for j := range total {
		keys[j] = fmt.Sprintf("seed-%d", j)
		parts[j] = int64(ring.PartitionOf(keys[j], testPartitions))
		slots[j] = counterdb.SlotOf(keys[j])
	}
	if d == sqlfence.Postgres {
		// One statement: a row at a time costs a round trip each.
		if _, err := db.Exec("INSERT INTO "+counterdb.CountersTable+" (key, partition, slot, value, epoch, seq) SELECT k, p, s, 1, 0, 0 FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(k, p, s)", keys, parts, slots); err != nil {
			t.Fatal(err)
		}
		return
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ph := d.Placeholder
	stmt, err := tx.Prepare("INSERT INTO " + counterdb.CountersTable + " (key, partition, slot, value, epoch, seq) VALUES (" + ph(1) + ", " + ph(2) + ", " + ph(3) + ", 1, 0, 0)")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	for j := range total {
		if _, err := stmt.Exec(keys[j], parts[j], slots[j]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// sample is one increment's end-to-end latency (retries included).
type sample struct {
	began time.Time
	took  time.Duration
}

// span is a window of time: the increments begun in [from, to).
type span struct{ from, to time.Time }

type latencySummary struct {
	n             int
	p50, p99, max time.Duration
}

func (s latencySummary) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", s.n, s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond), s.max.Round(10*time.Microsecond))
}

// summarize summarizes the latencies of the samples begun in spans.
func summarize(samples []sample, spans ...span) latencySummary {
	var ds []time.Duration
	for _, s := range samples {
		for _, w := range spans {
			if !s.began.Before(w.from) && s.began.Before(w.to) {
				ds = append(ds, s.took)
				break
			}
		}
	}
	if len(ds) == 0 {
		return latencySummary{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return latencySummary{n: len(ds), p50: at(0.50), p99: at(0.99), max: ds[len(ds)-1]}
}
