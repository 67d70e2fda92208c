package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// envBench enables TestThroughput; its value, if a duration, is how long
// each configuration runs (default 5s).
const envBench = "TENURE_COUNTER_BENCH"

// TestThroughput measures counter increments per second through a
// router.Client against three processes, on SQLite and (with
// TENURE_PG_DSN) PostgreSQL, with group commit on and off, in one run. It
// logs the figures and asserts nothing about them (only that the counts are
// exact). It runs only when TENURE_COUNTER_BENCH is set:
//
//	TENURE_COUNTER_BENCH=5s go test -run TestThroughput -v ./examples/counter
func TestThroughput(t *testing.T) {
	v := os.Getenv(envBench)
	if v == "" || testing.Short() {
		t.Skipf("set %s=1 (or a duration per configuration) to measure", envBench)
	}
	if proctest.RaceEnabled {
		t.Skip("figures under -race mean nothing")
	}
	dur := 5 * time.Second
	if d, err := time.ParseDuration(v); err == nil {
		dur = d
	}
	bin := proctest.Build(t, "counter")
	etcd := cluster.New(t, 3)
	cli := etcd.NewClient(t)
	type figure struct {
		name      string
		perSecond float64
		batch     float64
		p50, p99  time.Duration
	}
	var figures []figure
	for _, d := range counterdbtest.Dialects() {
		for _, group := range []bool{true, false} {
			name := fmt.Sprintf("%s/group-commit=%v", d, group)
			t.Run(name, func(t *testing.T) {
				spec, db, _ := counterdbtest.DB(t, d)
				clusterName := fmt.Sprintf("counter-bench-%d-%v", d, group)
				args := []string{
					"--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", clusterName,
					"--partitions", "64", "--ttl", "5s", "--group-commit=" + strconv.FormatBool(group),
				}
				procs := []*proctest.Proc{
					proctest.Start(t, bin, "b1", args...), proctest.Start(t, bin, "b2", args...), proctest.Start(t, bin, "b3", args...),
				}
				client := newTestClient(t, cli, clusterName)
				waitSettledN(t, client, 64, procs...)
				n, lat := drive(client, 32, 1000, dur)
				var batches, incrs float64
				for _, p := range procs {
					c, _ := p.Metric("counter_commit_batch_size_count")
					s, _ := p.Metric("counter_commit_batch_size_sum")
					batches += c
					incrs += s
				}
				for _, p := range procs {
					p.Stop(t)
				}
				var sum int64
				for _, v := range counterdbtest.Counters(t, db) {
					sum += v
				}
				if sum != n {
					t.Errorf("counters sum to %d, %d increments acknowledged", sum, n)
				}
				f := figure{name: name, perSecond: float64(n) / dur.Seconds(), p50: lat(0.5), p99: lat(0.99)}
				if batches > 0 {
					f.batch = incrs / batches
				}
				figures = append(figures, f)
				t.Logf("%s: %d increments in %v: %.0f/s, %.1f increments per transaction, latency p50 %v p99 %v",
					name, n, dur, f.perSecond, f.batch, f.p50, f.p99)
			})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "3 processes, 32 client goroutines, 1000 keys, 64 partitions, %v per configuration:\n", dur)
	for _, f := range figures {
		fmt.Fprintf(&b, "  %-32s %8.0f increments/s  %6.1f per transaction  p50 %-10v p99 %v\n", f.name, f.perSecond, f.batch, f.p50, f.p99)
	}
	t.Log(b.String())
}

// drive sends increments with workers goroutines over keys keys for dur,
// and returns how many were acknowledged and a latency quantile function.
func drive(c *router.Client, workers, keys int, dur time.Duration) (int64, func(float64) time.Duration) {
	l := &load{client: c}
	var (
		n    atomic.Int64
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	end := time.Now().Add(dur)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(end); i++ {
				began := time.Now()
				if _, err := l.send(fmt.Sprintf("key-%d", rand.IntN(keys)), fmt.Sprintf("b%d-%d", w, i)); err == nil {
					n.Add(1)
					mine = append(mine, time.Since(began))
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lats)
	return n.Load(), func(q float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(q*float64(len(lats))))].Round(10 * time.Microsecond)
	}
}
