package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMain is proctest.VerifyTestMain.
func TestMain(m *testing.M) { proctest.VerifyTestMain(m) }

const (
	testTTL        = 2 * time.Second
	testPartitions = 32
	testWorkers    = 8
	testKeys       = 40
	// testHold is the --hold of the process that the test pauses: the
	// SIGSTOP lands while a batch of admitted increments waits to commit.
	testHold = 300 * time.Millisecond
)

// Phases of TestChaos, recorded with every failed attempt.
const (
	phaseSteady  = "steady"
	phaseKill    = "kill"    // from SIGKILL until the survivors serve everything, plus a second
	phaseRejoin  = "rejoin"  // the killed process starts again
	phaseStop    = "stop"    // SIGSTOP past the TTL, SIGCONT
	phaseTerm    = "term"    // SIGTERM, start again
	phaseSettled = "settled" // the fleet of three again
)

// TestChaos runs three counter processes on a 3-member etcd and one
// database, sends keyed increments through a router.Client from several
// goroutines, and meanwhile SIGKILLs one process (and starts it again),
// SIGSTOPs another for longer than the TTL while it holds admitted
// increments (and SIGCONTs it), and SIGTERMs the third (and starts it
// again). Every increment is retried with its idempotency key until it is
// acknowledged; then the database holds exactly the acknowledged increments,
// each once, the paused process's late commit was refused as stale, and no
// attempt failed at the client except around the SIGKILL.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	for _, d := range counterdbtest.Dialects() {
		t.Run(d.String(), func(t *testing.T) { testChaos(t, d) })
	}
}

func testChaos(t *testing.T, d sqlfence.Dialect) {
	began := time.Now()
	bin := proctest.Build(t, "counter")
	etcd := cluster.New(t, 3)
	spec, db, _ := counterdbtest.DB(t, d)
	const clusterName = "counter-chaos"
	args := []string{
		"--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", clusterName,
		"--partitions", fmt.Sprint(testPartitions), "--ttl", testTTL.String(),
	}
	n1 := proctest.Start(t, bin, "n1", args...)
	n2 := proctest.Start(t, bin, "n2", append(slices.Clone(args), "--hold", testHold.String())...)
	n3 := proctest.Start(t, bin, "n3", args...)
	cli := etcd.NewClient(t)
	client := newTestClient(t, cli, clusterName)
	waitSettled(t, client, n1, n2, n3)
	t.Logf("3 processes ready after %v", time.Since(began).Round(time.Millisecond))

	l := startLoad(client, testWorkers, testKeys)
	defer l.finish()
	time.Sleep(time.Second)

	// SIGKILL n1: its partitions are served again once its lease expires.
	l.setPhase(phaseKill)
	killAt := time.Now()
	n1.Signal(t, syscall.SIGKILL)
	<-n1.Exited
	waitSettled(t, client, n2, n3)
	t.Logf("SIGKILL n1: its partitions served again %v later", time.Since(killAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	l.setPhase(phaseRejoin)
	n1 = proctest.Start(t, bin, "n1", args...)
	waitSettled(t, client, n1, n2, n3)
	t.Logf("n1 started again and serving %v after the SIGKILL", time.Since(killAt).Round(time.Millisecond))

	// SIGSTOP n2 while it holds admitted increments before their commit,
	// for longer than the TTL, then SIGCONT: the database refuses the
	// commit with its old tokens.
	l.setPhase(phaseStop)
	var (
		mu     sync.Mutex
		stopAt time.Time
	)
	n2.SetHook(func(ll proctest.LogLine) {
		if ll.Msg() != "holding before the commit" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if stopAt.IsZero() && n2.Cmd.Process.Signal(syscall.SIGSTOP) == nil {
			stopAt = time.Now()
		}
	})
	proctest.WaitFor(t, "n2 stopped before a commit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !stopAt.IsZero()
	}, n1, n2, n3)
	n2.SetHook(nil)
	if d == sqlfence.SQLite {
		// The pause may fall inside one of n2's write transactions (its
		// other increments commit beside the one that holds), and a
		// stopped SQLite writer keeps the database's write lock until it
		// runs again: the others claim n2's partitions in etcd, but their
		// fences cannot rise before SIGCONT. PostgreSQL ends such a
		// session after idle_in_transaction_session_timeout (sqldb.Open).
		waitClaimed(t, client, n1, n3)
	} else {
		waitSettled(t, client, n1, n3)
	}
	proctest.WaitFor(t, "a pause longer than the TTL", func() bool { return time.Since(stopAt) > testTTL+500*time.Millisecond }, n1, n3)
	served := n1.Ready() && n3.Ready()
	n2.Signal(t, syscall.SIGCONT)
	t.Logf("SIGSTOP n2 for %v; its partitions were claimed by the others meanwhile (and served: %v)", time.Since(stopAt).Round(time.Millisecond), served)
	if served {
		// The others raised the fences of n2's partitions while it was
		// stopped: the increments it held must be refused.
		proctest.WaitFor(t, "n2's late commit refused as stale", func() bool {
			n, err := n2.Metric(`tenure_fence_rejections_total{scope_kind="partition",store="sql"}`)
			return err == nil && n > 0
		}, n1, n2, n3)
		stale, _ := n2.Metric("counter_increments_stale_total")
		rejected, _ := n2.Metric(`tenure_fence_rejections_total{scope_kind="partition",store="sql"}`)
		t.Logf("n2 resumed: %v increments refused as stale (%v stale tokens)", stale, rejected)
		// The fence counts the refusal before the counter logs it: wait
		// for the line.
		proctest.WaitFor(t, `n2's "stale increments rejected" line`, func() bool {
			return len(n2.Find("stale increments rejected", nil)) > 0
		}, n1, n2, n3)
	} else {
		// The pause fell inside one of n2's SQLite write transactions:
		// no fence rose meanwhile, so the increments n2 held may commit
		// before the others' fences rise, which the database orders
		// before their tenure. The check below still holds.
		t.Logf("n2 was stopped inside a write transaction: the others served its partitions only after SIGCONT")
	}
	waitSettled(t, client, n1, n2, n3)

	// SIGTERM n3 and start it again: nothing fails at the client.
	l.setPhase(phaseTerm)
	termAt := time.Now()
	n3.Stop(t)
	var took string
	if left := n3.Find("left the fleet", nil); len(left) == 1 {
		took = left[0].Str("took")
	}
	t.Logf("SIGTERM n3: left the fleet in %s (the rest: the HTTP server finishing requests in flight), exited 0 after %v", took, time.Since(termAt).Round(time.Millisecond))
	n3 = proctest.Start(t, bin, "n3", args...)
	waitSettled(t, client, n1, n2, n3)
	t.Logf("n3 started again and serving %v after its SIGTERM", time.Since(termAt).Round(time.Millisecond))

	l.setPhase(phaseSettled)
	time.Sleep(time.Second)
	l.finish()

	// Every attempt that failed at the client did so around the SIGKILL,
	// and was retried to success with its idempotency key.
	byPhase := make(map[string]int)
	for _, e := range l.errs {
		byPhase[e.phase]++
		if e.phase != phaseKill {
			t.Errorf("%s phase: increment %s of %s failed at %s: %s", e.phase, e.idem, e.key, e.at.Format("15:04:05.000"), e.err)
		}
	}
	if len(l.lost) > 0 {
		t.Errorf("%d increments never acknowledged: %v", len(l.lost), l.lost)
	}
	for _, b := range l.badResends {
		t.Errorf("resent increment not answered as a duplicate with its first value: %s", b)
	}
	stats := client.Stats()
	t.Logf("%d increments acknowledged (%d answered as duplicates of an earlier attempt), %d sent again after their acknowledgement and answered with their stored result; client: %d attempts, %d retries; failed attempts by phase %v, retried to success by the test",
		l.total, l.dups, l.resent, stats.Attempts, stats.Retries, byPhase)

	for _, p := range []*proctest.Proc{n1, n2, n3} {
		p.Stop(t)
	}
	checkCounts(t, l, counterdbtest.Counters(t, db), counterdbtest.Applied(t, db))
	t.Logf("%s: %v in all", d, time.Since(began).Round(time.Millisecond))
}

// checkCounts checks the database against the acknowledged increments:
// each counter equals its key's acknowledged increments, every acknowledged
// idempotency key is applied once to its key, nothing else is applied, and
// a key's applied values are exactly 1..value.
func checkCounts(t *testing.T, l *load, counters map[string]int64, applied map[string]counterdb.AppliedRow) {
	t.Helper()
	for key, n := range l.acked {
		if counters[key] != n {
			t.Errorf("counter %s = %d in the database, %d increments acknowledged", key, counters[key], n)
		}
	}
	for key, v := range counters {
		if _, ok := l.acked[key]; !ok {
			t.Errorf("counter %s = %d in the database, no increment acknowledged", key, v)
		}
	}
	values := make(map[string][]int64)
	for idem, r := range applied {
		key, ok := l.ackedIdem[idem]
		switch {
		case !ok:
			t.Errorf("increment %s of %s (value %d, by %s at epoch %d) applied but never acknowledged", idem, r.Key, r.Value, r.Node, r.Epoch)
		case key != r.Key:
			t.Errorf("increment %s applied to %s, sent for %s", idem, r.Key, key)
		}
		values[r.Key] = append(values[r.Key], r.Value)
	}
	for idem, key := range l.ackedIdem {
		if _, ok := applied[idem]; !ok {
			t.Errorf("increment %s of %s acknowledged but not in the database", idem, key)
		}
	}
	for key, vs := range values {
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		for i, v := range vs {
			if v != int64(i+1) {
				t.Errorf("counter %s: applied values %v are not 1..%d", key, vs, len(vs))
				break
			}
		}
	}
	var sum int64
	for _, v := range counters {
		sum += v
	}
	t.Logf("database: %d counters summing to %d, %d increments applied, %d acknowledged", len(counters), sum, len(applied), l.total)
}

// newTestClient returns a router.Client of the fleet with room for a crash
// failover in its retries.
func newTestClient(t *testing.T, cli *clientv3.Client, cluster string) *router.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
	defer cancel()
	b := router.DefaultBackoff()
	b.MaxAttempts = 20
	c, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: cluster, Backoff: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitSettled waits until every process of live is ready and the client
// routes every partition to a claim held by one of them.
func waitSettled(t *testing.T, c *router.Client, live ...*proctest.Proc) {
	t.Helper()
	waitSettledN(t, c, testPartitions, live...)
}

// waitSettledN is waitSettled for a fleet of partitions partitions.
func waitSettledN(t *testing.T, c *router.Client, partitions int, live ...*proctest.Proc) {
	t.Helper()
	waitOwned(t, c, partitions, true, live...)
}

// waitClaimed waits until every partition is claimed in etcd by one of
// live, ready to serve or not.
func waitClaimed(t *testing.T, c *router.Client, live ...*proctest.Proc) {
	t.Helper()
	waitOwned(t, c, testPartitions, false, live...)
}

// waitOwned waits until every one of partitions is claimed by one of live
// and, if ready, every process of live reports itself ready.
func waitOwned(t *testing.T, c *router.Client, partitions int, ready bool, live ...*proctest.Proc) {
	t.Helper()
	ids := make([]string, len(live))
	for i, p := range live {
		ids[i] = p.ID
	}
	what := fmt.Sprintf("every partition claimed by %v", ids)
	if ready {
		what = fmt.Sprintf("every partition served by %v", ids)
	}
	proctest.WaitFor(t, what, func() bool {
		for p := range partitions {
			r := c.LookupPartition(p)
			if r.Epoch == 0 || !slices.Contains(ids, r.Owner) {
				return false
			}
		}
		for _, p := range live {
			if ready && !p.Ready() {
				return false
			}
		}
		return true
	}, live...)
}

// load sends increments through a router.Client from several goroutines,
// each increment with its own idempotency key, retried with that key until
// it is acknowledged.
type load struct {
	client *router.Client
	phase  atomic.Pointer[string]
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	mu         sync.Mutex
	acked      map[string]int64  // key -> increments acknowledged
	ackedIdem  map[string]string // idempotency key -> key
	total      int64
	dups       int64
	errs       []attemptErr
	lost       []string // increments given up on
	resent     int      // acknowledged increments sent again
	badResends []string // resent increments not answered with their stored result
}

// attemptErr is one failed attempt of an increment at the client.
type attemptErr struct {
	at             time.Time
	phase          string
	key, idem, err string
}

// newLoad returns a load through c, in the steady phase, that runs no
// worker yet (run).
func newLoad(c *router.Client) *load {
	l := &load{client: c, stop: make(chan struct{}), acked: make(map[string]int64), ackedIdem: make(map[string]string)}
	l.setPhase(phaseSteady)
	return l
}

// run starts workers goroutines, each calling step(w, i) for i = 0, 1, ...
// (w is the worker's number) until the load stops (finish).
func (l *load) run(workers int, step func(w, i int)) {
	loop(l.stop, &l.wg, workers, step)
}

// loop starts workers goroutines on wg, each calling step(w, i) for i = 0,
// 1, ... until stop is closed.
func loop(stop <-chan struct{}, wg *sync.WaitGroup, workers int, step func(w, i int)) {
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				step(w, i)
			}
		}()
	}
}

// capacity runs workers goroutines of increments in a closed loop for d
// and returns how many were acknowledged per second.
func (l *load) capacity(workers int, d time.Duration) float64 {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var done atomic.Int64
	began := time.Now()
	loop(stop, &wg, workers, func(w, i int) {
		l.incr(fmt.Sprintf("key-%d", rand.IntN(testKeys*4)), fmt.Sprintf("cap-%d-%d", w, i))
		done.Add(1)
	})
	time.Sleep(d)
	close(stop)
	wg.Wait()
	return float64(done.Load()) / time.Since(began).Seconds()
}

// runRate calls step(i, at) at rate calls per second until the load stops
// (finish), each on a goroutine of its own at its scheduled time at, however
// long the calls before it take: an open loop, whose calls are measured
// from their schedule, so that a stall delays the calls scheduled during
// it instead of holding them back (no coordinated omission). At most
// maxOpen calls run at once; the schedule waits for one to end beyond
// that.
func (l *load) runRate(rate float64, step func(i int, at time.Time)) {
	const maxOpen = 1024
	every := time.Duration(float64(time.Second) / rate)
	open := make(chan struct{}, maxOpen)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		start := time.Now()
		for i := 0; ; i++ {
			at := start.Add(time.Duration(i) * every)
			if d := time.Until(at); d > 0 {
				select {
				case <-l.stop:
					return
				case <-time.After(d):
				}
			}
			select {
			case <-l.stop:
				return
			case open <- struct{}{}:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-open }()
				step(i, at)
			}()
		}
	}()
}

func startLoad(c *router.Client, workers, keys int) *load {
	l := newLoad(c)
	l.run(workers, func(w, i int) {
		l.incr(fmt.Sprintf("key-%d", rand.IntN(keys)), fmt.Sprintf("w%d-%d", w, i))
	})
	return l
}

func (l *load) setPhase(p string) { l.phase.Store(&p) }

// finish stops the load and waits for the increments in progress.
func (l *load) finish() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// incr sends one increment until it is acknowledged (or a minute passed).
func (l *load) incr(key, idem string) {
	deadline := time.Now().Add(time.Minute)
	for {
		phase := *l.phase.Load()
		at := time.Now()
		a, err := l.send(key, idem)
		if err == nil {
			l.mu.Lock()
			l.acked[key]++
			l.ackedIdem[idem] = key
			l.total++
			if a.Duplicate {
				l.dups++
			}
			l.mu.Unlock()
			if rand.IntN(10) == 0 {
				l.resend(key, idem, a)
			}
			return
		}
		l.mu.Lock()
		l.errs = append(l.errs, attemptErr{at: at, phase: phase, key: key, idem: idem, err: err.Error()})
		if time.Now().After(deadline) {
			l.lost = append(l.lost, idem)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

// resend sends an acknowledged increment again, as a client that lost the
// answer would: the answer must be the stored result, marked duplicate.
func (l *load) resend(key, idem string, first answer) {
	a, err := l.send(key, idem)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resent++
	switch {
	case err != nil:
		l.errs = append(l.errs, attemptErr{at: time.Now(), phase: *l.phase.Load(), key: key, idem: idem, err: "resend: " + err.Error()})
	case !a.Duplicate || a.Value != first.Value:
		l.badResends = append(l.badResends, fmt.Sprintf("%s of %s: first answer %d, resent %+v", idem, key, first.Value, a))
	}
}

func (l *load) send(key, idem string) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://counter/counters/"+key+"/incr", nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set(router.HeaderIdempotencyKey, idem)
	resp, err := l.client.Do(ctx, key, req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return answer{}, fmt.Errorf("answer %q: %w", body, err)
	}
	if a.Key != key || a.Value < 1 {
		return answer{}, fmt.Errorf("answer %q for key %s", body, key)
	}
	return a, nil
}
