package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/cluster"
)

// envHandoff runs TestHandoffSpans: the number of rounds (1 if not a
// number).
const envHandoff = "TENURE_HANDOFF_SPANS"

// TestHandoffSpans measures a planned move's handoff from the spans of the
// processes themselves (--trace-file), over the counter's rolling restart
// (three processes, 32 partitions, increments from 8 goroutines of a
// router.Client, each process restarted in turn: SIGTERM, start again,
// wait until the fleet serves everything), for two builds side by side:
//
//   - after: this build, on a fleet whose spec requires the handover
//     feature before the restarts, so that every planned move hands its
//     claim over in one transaction;
//   - before: the counter built with the tag featurelevel_prev (a build
//     without the feature), whose planned moves delete their claims, the
//     successor claiming after it sees the deletion.
//
// A move is a holder's tenure.move.out joined to the successor's
// tenure.move.in by trace ID (both derive it from the moving claim). Per
// move:
//
//   - handoff: from the end of the holder's tenure.move.drain (the work it
//     admitted is done: the moment it may let go) to the successor's
//     admit event (the partition admits work again);
//   - gap: from the start of the drain (the holder's admission ended) to
//     the admit: the time no call is admitted;
//   - its phases: release (tenure.move.release), write (the holder's
//     tenure.move.handover: its claim's deletion or hand-over queued, to
//     its answer), seen (from the end of that to the successor's next
//     phase: its tenure.claim, or its tenure.fence for a handed-over
//     claim; across processes, by the one wall clock of the machine),
//     claim (the successor's tenure.claim), fence, start (tenure.start
//     to admit);
//   - etcd writes on the critical path: the distinct revisions of the
//     holder's write (tenure.revision) and the successor's epoch: 1 for a
//     hand-over (the epoch is the hand-over's revision), 2 after a
//     deletion.
//
// Per leave (a process's SIGTERM until it exited) it counts the
// partitions moved and the distinct revisions of the holder's writes and
// of the successors' claims: the batching. Over the restarts it counts
// every revision that changed the fleet's keys, by kind of key (claims,
// the holders' write checks on their handoff keys, readiness keys,
// members), and probes etcd from the test process with a transaction of
// one compare and one put every 20ms: etcd's own commit latency, overall
// and at the moments of the holders' writes, beside the write phase. It prints p50, p90 and max per
// database and build, the load average of the machine around each run, and
// checks that every move of the restarts was joined, that the build
// without the feature never hands over and this one always does, with the
// successor's epoch the hand-over's revision, and that no increment
// failed.
//
// It runs only with TENURE_HANDOFF_SPANS set (rounds: each round runs
// every database and both builds, alternating which goes first), on
// SQLite and, with TENURE_PG_DSN, PostgreSQL:
//
//	TENURE_HANDOFF_SPANS=2 TENURE_PG_DSN=postgres://... go test -count=1 -run TestHandoffSpans -v ./examples/counter
func TestHandoffSpans(t *testing.T) {
	v := os.Getenv(envHandoff)
	if v == "" || v == "0" {
		t.Skipf("set %s (rounds) to run: it builds two binaries and runs a rolling restart per database and build", envHandoff)
	}
	rounds := 1
	_, _ = fmt.Sscan(v, &rounds)
	builds := map[string]string{"after": proctest.Build(t, "counter"), "before": buildTagged(t, "counter-prev", "featurelevel_prev")}
	seed := 1000
	if s := os.Getenv("TENURE_ROLLING_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	res := map[string]*handoffResult{}
	var order []string
	for r := range rounds {
		for _, d := range counterdbtest.Dialects() {
			names := []string{"after", "before"}
			if r%2 == 1 {
				slices.Reverse(names)
			}
			for _, b := range names {
				key := d.String() + "/" + b
				if res[key] == nil {
					res[key] = &handoffResult{revisions: map[string]int{}}
					order = append(order, key)
				}
				t.Run(fmt.Sprintf("%d/%s", r, key), func(t *testing.T) {
					runHandoff(t, builds[b], d, b == "after", seed, res[key])
				})
			}
		}
	}
	slices.Sort(order)
	var sb strings.Builder
	for _, k := range order {
		sb.WriteString(res[k].summary(k))
	}
	t.Logf("handoffs from the spans (%d round(s), %d partitions, %d counters per partition; ms; noisy on a shared machine: compare the builds of one run)\n%s", rounds, testPartitions, seed, sb.String())
}

// buildTagged builds the counter with tags into a temporary directory.
func buildTagged(t *testing.T, name, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build", "-tags", tags, "-o", bin}
	if proctest.RaceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	return bin
}

// handoffResult is the moves and leaves of the runs of one database and
// build.
type handoffResult struct {
	moves  []handoffMove
	leaves []leaveWrites
	loads  []string
	// unjoined counts the moves out of the restarts with no move in.
	unjoined int
	// probe holds the etcd probe's transactions (probeEtcd) during the
	// restarts.
	probe []probeTxn
	// revisions counts the revisions of the restarts that changed the
	// fleet's keys, by kind of key (revisionsBetween).
	revisions map[string]int
}

// unjoinedMove is a completed move out whose trace holds no move in that
// admitted: when it began, and what its trace shows.
type unjoinedMove struct {
	at   time.Time
	what string
}

// handoffMove is one planned move as its spans show it.
type handoffMove struct {
	partition                                 int64
	handoff, gap                              time.Duration
	release, write, seen, claim, fence, start time.Duration
	writes                                    int
	handedOver                                bool
	holderRev, epoch                          int64
	holder, successor                         string
	outStart                                  time.Time
	writeFrom, writeTo                        time.Time // the holder's write phase
}

// leaveWrites is one leave's moves and the distinct revisions of their
// writes.
type leaveWrites struct {
	moved, holderRevs, claimRevs int
}

func runHandoff(t *testing.T, bin string, d sqlfence.Dialect, handover bool, seed int, res *handoffResult) {
	load0 := loadAvg()
	etcd := cluster.New(t, 1)
	spec, db, dialect := counterdbtest.DB(t, d)
	name := fmt.Sprintf("counter-spans-%s-%v", d, handover)
	dir := t.TempDir()
	starts := 0
	start := func(id string) *proctest.Proc {
		starts++
		return proctest.Start(t, bin, id, "--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", name,
			"--partitions", fmt.Sprint(testPartitions), "--ttl", testTTL.String(),
			"--trace-file", filepath.Join(dir, fmt.Sprintf("%s-%d.spans", id, starts)))
	}
	procs := []*proctest.Proc{start("n1"), start("n2"), start("n3")}
	cli := etcd.NewClient(t)
	client := newTestClient(t, cli, name)
	waitSettled(t, client, procs...)
	if handover {
		ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
		_, err := fleetview.RequireFeature(ctx, cli, keys.New(name), fleetview.FeatureHandover)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	seedCounters(t, db, dialect, seed)
	l := startLoad(client, testWorkers, testKeys*4)
	defer l.finish()
	time.Sleep(time.Second) // every key loaded once before the restarts

	stopProbe := probeEtcd(cli, "/counter-spans-probe/"+name)
	rev0 := currentRev(t, cli)
	var restarts []restart
	for i, p := range procs {
		l.setPhase(phaseMoves)
		r := restart{id: p.ID, term: time.Now()}
		p.Stop(t)
		r.exited = time.Now()
		procs[i] = start(p.ID)
		waitSettled(t, client, procs...)
		r.settled = time.Now()
		restarts = append(restarts, r)
		l.setPhase(phaseAfter)
		time.Sleep(time.Second)
	}
	res.probe = append(res.probe, stopProbe()...)
	for k, n := range revisionsBetween(t, cli, keys.New(name).Prefix(), rev0, currentRev(t, cli)) {
		res.revisions[k] += n
	}
	l.finish()
	for _, p := range procs {
		p.Stop(t) // writes its spans
	}
	for _, e := range l.errs {
		t.Errorf("%s phase: increment %s of %s failed at %s: %s", e.phase, e.idem, e.key, e.at.Format("15:04:05.000"), e.err)
	}
	res.loads = append(res.loads, load0+" -> "+loadAvg())

	spans := readSpans(t, dir)
	moves, unjoined := joinMoves(spans)
	var in []handoffMove
	for _, m := range moves {
		if m.outStart.After(restarts[0].term) && m.outStart.Before(restarts[len(restarts)-1].settled) {
			in = append(in, m)
		}
	}
	for _, u := range unjoined {
		if u.at.After(restarts[0].term) && u.at.Before(restarts[len(restarts)-1].settled) {
			// The successor's move in was called off (the ring changed
			// again: a restarted node came back), so the partition's next
			// tenure began in another trace.
			res.unjoined++
			t.Logf("unjoined: %s", u.what)
		}
	}
	if len(in) == 0 {
		t.Fatalf("no move in the spans of the restarts (%d spans, %d moves)", len(spans), len(moves))
	}
	for _, m := range in {
		switch {
		case !handover && m.handedOver:
			t.Errorf("partition %d was handed over by the build without the feature", m.partition)
		case handover && !m.handedOver:
			t.Errorf("partition %d (%s to %s) was not handed over on a fleet that requires the feature", m.partition, m.holder, m.successor)
		case m.handedOver && (m.epoch != m.holderRev || m.writes != 1):
			t.Errorf("partition %d handed over at revision %d, served at epoch %d", m.partition, m.holderRev, m.epoch)
		}
	}
	for _, r := range restarts {
		var lw leaveWrites
		hr, cr := map[int64]bool{}, map[int64]bool{}
		for _, m := range in {
			if m.holder != r.id || m.outStart.Before(r.term) || m.outStart.After(r.exited) {
				continue
			}
			lw.moved++
			hr[m.holderRev] = true
			if m.epoch != m.holderRev {
				cr[m.epoch] = true
			}
		}
		lw.holderRevs, lw.claimRevs = len(hr), len(cr)
		res.leaves = append(res.leaves, lw)
	}
	res.moves = append(res.moves, in...)
	t.Logf("%s handover=%v: %d moves in the restarts, load %s", d, handover, len(in), res.loads[len(res.loads)-1])
}

// probeTxn is one transaction of the etcd probe: when it began, and how
// long it took.
type probeTxn struct {
	at   time.Time
	took time.Duration
}

// probeEtcd commits a transaction shaped like a hand-over (a compare and
// a put of key) every 20ms on cli, one at a time, until the returned
// function is called, which returns them: what etcd itself takes to
// commit, from a process that is not part of the fleet, at the moments
// the holders' writes are measured.
func probeEtcd(cli *clientv3.Client, key string) (stop func() []probeTxn) {
	done := make(chan struct{})
	out := make(chan []probeTxn, 1)
	go func() {
		var lat []probeTxn
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- lat
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
			began := time.Now()
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(key), ">", -1)).Then(clientv3.OpPut(key, "probe")).Commit()
			cancel()
			if err == nil {
				lat = append(lat, probeTxn{at: began, took: time.Since(began)})
			}
		}
	}()
	return func() []probeTxn {
		close(done)
		return <-out
	}
}

// loadAvg returns the machine's load averages (1, 5, 15 minutes).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// currentRev returns etcd's current revision.
func currentRev(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
	defer cancel()
	r, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}

// revisionsBetween returns how many revisions of (from, to] changed keys
// under prefix, by the kind of key (the first part of the key after
// prefix: claims, ready, handoff, members...): the fleet's etcd writes.
func revisionsBetween(t *testing.T, cli *clientv3.Client, prefix string, from, to int64) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
	defer cancel()
	revs := map[string]map[int64]bool{}
	// The whole keyspace, so that the last revision is always seen.
	for wr := range cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := wr.Err(); err != nil {
			t.Fatalf("reading the history of %s: %v", prefix, err)
		}
		last := int64(0)
		for _, ev := range wr.Events {
			last = ev.Kv.ModRevision
			k, ok := strings.CutPrefix(string(ev.Kv.Key), prefix)
			if !ok || last > to {
				continue
			}
			kind, _, _ := strings.Cut(k, "/")
			if revs[kind] == nil {
				revs[kind] = map[int64]bool{}
			}
			revs[kind][last] = true
		}
		if last >= to {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("reading the history of %s to revision %d: %v", prefix, to, ctx.Err())
	}
	out := map[string]int{}
	for k, rs := range revs {
		out[k] = len(rs)
	}
	return out
}
