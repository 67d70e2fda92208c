package router_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestNoSpace fills a 3-member etcd (each member in its own process,
// --quota-backend-bytes 16 MiB) until it raises its NOSPACE alarm, under
// keyed load through a router.Client whose requests make fenced writes to
// SQLite and to PostgreSQL (not to etcd: under NOSPACE etcd refuses the
// put of a fenced write, so no such write could succeed while the alarm
// stands), on four nodes (16 partitions). While the alarm stands it starts
// a graceful leave of node a, a pin of one of b's partitions to c and a
// drain of b: each waits (the nodes keep their partitions and serve them,
// the leave says why in its log line and in tenure_etcd_alarm), no
// partition is unclaimed while the alarm stands (an Observer checks every
// change) and every request succeeds. Then it deletes what filled etcd,
// compacts, defragments every member and disarms the alarm, as etcdctl
// does: the three operations complete without restarting anything. Every
// acknowledged write has its one row in each database, and none was
// admitted below its scope's floor. The figures (how long each waited,
// from its start and from the disarm; requests failed; rows) go to the
// log:
//
//	go test -count=1 -run TestNoSpace -v ./router
func TestNoSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: fills an etcd database")
	}
	const parts = 16
	cfg := cluster.DefaultConfig()
	cfg.Members = 3
	cfg.Processes = true
	cfg.QuotaBackendBytes = 16 << 20
	etcd := cluster.NewWithConfig(t, cfg)

	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "store.db")+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	pg := pgtest.ForTest(t)
	stores := []nospaceStore{
		newNospaceStore(ctx, t, "SQLite", db, sqlfence.SQLite, "INTEGER PRIMARY KEY AUTOINCREMENT"),
		newNospaceStore(ctx, t, "PostgreSQL", pg.DB, sqlfence.Postgres, "BIGSERIAL PRIMARY KEY"),
	}
	var fencers []fence.Fencer
	for _, st := range stores {
		fencers = append(fencers, sqlfence.Fencer{DB: st.db, Fences: st.fences})
	}

	logs := map[string]*testsupport.Buffer{}
	regs := map[string]*prometheus.Registry{}
	for _, id := range []string{"a", "b", "c", "d"} {
		logs[id], regs[id] = &testsupport.Buffer{}, prometheus.NewRegistry()
	}
	f := newFleet(t, etcd, "nospace", fleetOptions{
		Partitions: parts,
		Fencers:    fencers,
		Handler: func(*member) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tok, _ := fence.FromContext(r.Context())
				id, err := io.ReadAll(r.Body)
				for _, st := range stores {
					if err != nil {
						break
					}
					err = st.write(r.Context(), tok, string(id))
				}
				if err != nil {
					router.WriteError(w, r, err)
					return
				}
				_, _ = w.Write([]byte("ok"))
			})
		},
		Tune: func(id string, cfg *ownership.Config) {
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs[id], Level: hclog.Info})
			cfg.Metrics = regs[id]
		},
	})
	for _, id := range []string{"a", "b", "c", "d"} {
		f.start(id)
	}
	f.waitStable()
	cli := etcd.NewClient(t)
	c := newClient(t, cli, router.ClientConfig{Cluster: "nospace"})
	waitClientAgrees(t, c, f)

	// No partition is unclaimed while the alarm stands: an Observer checks
	// every change from the filling to the reclaim. (After the disarm,
	// the planned moves that waited go on: each has the usual gap of a
	// few round trips between the deletion and the new claim.)
	var underAlarm atomic.Bool
	o, err := fleet.Observe(ctx, etcd.NewClient(t), fleet.ObserverConfig{Cluster: "nospace", Ring: ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor}})
	require.NoError(t, err)
	defer o.Close()
	var unclaimed atomic.Int64
	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			ch := o.Changed()
			for p := range parts {
				if underAlarm.Load() && o.LookupPartition(p).Epoch == 0 {
					unclaimed.Add(1)
					t.Errorf("partition %d unclaimed at revision %d", p, o.Revision())
				}
			}
			select {
			case <-ch:
			case <-stopWatch:
				return
			}
		}
	}()

	// Keyed load: 64 keys, one request after another per worker, 4 workers.
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var ackedMu sync.Mutex
	var acked []string
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	for w := range 4 {
		load.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("k%d", (i*4+w)%64)
				id := fmt.Sprintf("w%d-%d", w, i)
				rctx, cancel := context.WithTimeout(loadCtx, 10*time.Second)
				resp, err := postVia(rctx, c, key, "/k/"+key, "text/plain", []byte(id))
				cancel()
				if err == nil {
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				switch {
				case err == nil:
					ok.Add(1)
					ackedMu.Lock()
					acked = append(acked, id)
					ackedMu.Unlock()
				case loadCtx.Err() == nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	// Fill etcd until it refuses a put.
	filled := time.Now()
	underAlarm.Store(true)
	puts, err := cluster.Fill(ctx, cli)
	require.NoError(t, err)
	t.Logf("etcd full after %d puts of 256 KiB (%v)", puts, time.Since(filled).Round(time.Millisecond))
	alarms, err := cluster.Alarms(ctx, cli)
	require.NoError(t, err)
	require.NotEmpty(t, alarms)
	require.Equal(t, pb.AlarmType_NOSPACE, alarms[0].Alarm)
	servedBefore := ok.Load()

	// While the alarm stands: a graceful leave, a pin and a drain.
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: "nospace"})
	require.NoError(t, err)
	a, b := f.get("a"), f.get("b")
	var pinned int
	for p := range parts {
		if b.node.LookupPartition(p).Owner == "b" {
			pinned = p
			break
		}
	}
	type result struct {
		what string
		err  error
		at   time.Time
	}
	results := make(chan result, 3)
	started := time.Now()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		results <- result{"leave a", a.node.Close(cctx), time.Now()}
	}()
	go func() {
		octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err := op.Pin(octx, pinned, "c", fleet.Action{Actor: "test", Reason: "nospace"})
		results <- result{"pin", err, time.Now()}
	}()
	go func() {
		octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err := op.Drain(octx, "b", fleet.Action{Actor: "test", Reason: "nospace"})
		results <- result{"drain b", err, time.Now()}
	}()

	// The leave waits and says why.
	waitUntil(t, 30*time.Second, "the leave did not say why it waits", func() (string, <-chan struct{}) {
		ch := logs["a"].Written()
		if strings.Contains(logs["a"].String(), "etcd database full (NOSPACE alarm): keeping") {
			return "", ch
		}
		return "no NOSPACE line yet", ch
	})
	testsupport.WaitMetric(t, regs["a"], "tenure_etcd_alarm", map[string]string{"alarm": "NOSPACE", "node": "a"}, 1, 10*time.Second)
	// The owners keep serving for a while under the alarm.
	for _, id := range []string{"a", "b"} {
		require.NotZero(t, len(f.get(id).node.Status().Partitions), "%s serves", id)
	}
	held := ok.Load()
	waitUntil(t, 30*time.Second, "requests did not go on under the alarm", func() (string, <-chan struct{}) {
		ch := make(chan struct{})
		go func() { time.Sleep(50 * time.Millisecond); close(ch) }()
		if ok.Load() > held+200 {
			return "", ch
		}
		return "waiting for requests", ch
	})
	select {
	case r := <-results:
		t.Fatalf("%s ended under the alarm: %v", r.what, r.err)
	default:
	}
	servedUnder := ok.Load() - servedBefore

	// Delete what filled etcd (deletions pass under the alarm), compact,
	// defragment, disarm: the three complete.
	underAlarm.Store(false)
	reclaim := time.Now()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	require.NoError(t, etcd.ReclaimSpace(rctx, cli))
	cancel()
	disarmed := time.Now()
	for range 3 {
		r := <-results
		require.NoError(t, r.err, r.what)
		t.Logf("%s: waited %v from its start, done %v after the disarm", r.what, r.at.Sub(started).Round(time.Millisecond), r.at.Sub(disarmed).Round(time.Millisecond))
	}
	require.Contains(t, logs["a"].String(), "etcd takes writes again: the planned releases that waited go on", "the leave says it goes on")
	f.remove("a") // closed: its server and router go now
	_ = a.srv.Close()
	<-a.served
	a.router.Close()
	waitUntil(t, 30*time.Second, "the fleet did not settle", func() (string, <-chan struct{}) {
		ch := either(t, f.get("c").node.Changed(), f.get("d").node.Changed())
		if got := f.get("c").node.LookupPartition(pinned); got.Owner != "c" || !got.Local {
			return fmt.Sprintf("pinned partition %d: %s", pinned, got.Owner), ch
		}
		if n := len(f.get("b").node.Status().Partitions); n != 0 {
			return fmt.Sprintf("drained b serves %d", n), ch
		}
		if n := len(f.get("c").node.Status().Partitions) + len(f.get("d").node.Status().Partitions); n != parts {
			return fmt.Sprintf("c and d serve %d", n), ch
		}
		return "", ch
	})
	testsupport.WaitMetric(t, regs["c"], "tenure_etcd_alarm", map[string]string{"alarm": "NOSPACE", "node": "c"}, 0, 10*time.Second)
	stopLoad()
	load.Wait()
	close(stopWatch)
	<-watchDone
	t.Logf("reclaim (compact, defrag x3, disarm) took %v; requests: %d ok (%d under the alarm), %d failed (first: %v); unclaimed observations: %d",
		disarmed.Sub(reclaim).Round(time.Millisecond), ok.Load(), servedUnder, failed.Load(), firstErr.Load(), unclaimed.Load())
	for _, st := range stores {
		st.check(t, acked)
	}
	require.Zero(t, failed.Load(), "requests failed")
	require.Zero(t, unclaimed.Load())
}

// nospaceStore is one of TestNoSpace's SQL databases: its fences table and
// a row per write.
type nospaceStore struct {
	name    string
	db      *sql.DB
	fences  *sqlfence.Fences
	dialect sqlfence.Dialect
}

// newNospaceStore creates the fences table and the writes table, whose seq
// column is of type seq.
func newNospaceStore(ctx context.Context, t *testing.T, name string, db *sql.DB, d sqlfence.Dialect, seq string) nospaceStore {
	t.Helper()
	fences, err := sqlfence.New(sqlfence.Config{Dialect: d, Table: "nospace_fences"})
	require.NoError(t, err)
	require.NoError(t, fences.CreateTable(ctx, db))
	_, err = db.ExecContext(ctx, "CREATE TABLE nospace_writes (seq "+seq+", id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, epoch BIGINT NOT NULL)")
	require.NoError(t, err)
	return nospaceStore{name: name, db: db, fences: fences, dialect: d}
}

// write adds the row of request id under tok; a retried request whose row
// is there already adds none.
func (st nospaceStore) write(ctx context.Context, tok fence.Token, id string) error {
	ph := st.dialect.Placeholder
	return st.fences.Do(ctx, st.db, tok, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO nospace_writes (id, scope, epoch) VALUES ("+ph(1)+", "+ph(2)+", "+ph(3)+") ON CONFLICT (id) DO NOTHING",
			id, tok.Scope, tok.Epoch)
		return err
	})
}

// check checks the writes against the acknowledged ones and the floors:
// every acknowledged write has its row (one at most: ids are unique), and
// in the order the rows were written (a scope's writes are serialized by
// its fence row) the epochs of each scope's writes never go down and none
// is above its scope's floor.
func (st nospaceStore) check(t *testing.T, acked []string) {
	t.Helper()
	floors := map[string]int64{}
	rows, err := st.db.Query("SELECT scope, epoch FROM nospace_fences")
	require.NoError(t, err)
	for rows.Next() {
		var s string
		var e int64
		require.NoError(t, rows.Scan(&s, &e))
		floors[s] = e
	}
	require.NoError(t, rows.Err())
	rows.Close()
	rows, err = st.db.Query("SELECT id, scope, epoch FROM nospace_writes ORDER BY seq")
	require.NoError(t, err)
	defer rows.Close()
	written := map[string]bool{}
	last := map[string]int64{}
	var stale, aboveFloor int
	for rows.Next() {
		var id, s string
		var e int64
		require.NoError(t, rows.Scan(&id, &s, &e))
		written[id] = true
		if e < last[s] {
			stale++
		}
		last[s] = max(last[s], e)
		if e > floors[s] {
			aboveFloor++
		}
	}
	require.NoError(t, rows.Err())
	missing := 0
	for _, id := range acked {
		if !written[id] {
			missing++
		}
	}
	t.Logf("%s: %d rows for %d acknowledged writes; %d acknowledged without a row; %d stale (below a floor recorded before them)",
		st.name, len(written), len(acked), missing, stale)
	require.Zero(t, missing, "%s: acknowledged writes without their row", st.name)
	require.Zero(t, stale, "%s: writes below a floor", st.name)
	require.Zero(t, aboveFloor, "%s: writes under an epoch above their scope's floor", st.name)
}
