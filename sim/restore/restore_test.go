package restore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

const (
	fleetName  = "restore"
	partitions = 32
	ttl        = 2 * time.Second
	workers    = 8
	keys       = 200
)

// node is one node of the fleet, in this process, serving writes over HTTP.
type node struct {
	*ownership.Node
	reg  *prometheus.Registry
	logs *testsupport.Buffer
	srv  *http.Server
	r    *router.Router
}

// sqlStore is one of the fleet's SQL databases: its fences table and its
// writes table, a row per acknowledged write.
type sqlStore struct {
	name   string
	db     *sql.DB
	fences *sqlfence.Fences
	ph     func(int) string // the dialect's placeholder
	spec   string           // tenurectl's --db
}

// newSQLStore creates the fences and writes tables in db.
func newSQLStore(ctx context.Context, t *testing.T, name string, db *sql.DB, d sqlfence.Dialect, spec, writes string) sqlStore {
	t.Helper()
	fences, err := sqlfence.New(sqlfence.Config{Dialect: d})
	require.NoError(t, err)
	require.NoError(t, fences.CreateTable(ctx, db))
	_, err = db.ExecContext(ctx, writes)
	require.NoError(t, err)
	return sqlStore{name: name, db: db, fences: fences, ph: d.Placeholder, spec: spec}
}

// startNode joins node id to the fleet with a fencer for the etcd store
// and one for each SQL database, and serves POST /w/{key} with the
// request's id as its body: a write to etcd and a row in each database,
// all under the request's token (a retried request whose row is there
// already adds none).
func startNode(t *testing.T, cli *clientv3.Client, dbs []sqlStore, id string) *node {
	t.Helper()
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: fleetName})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := &testsupport.Buffer{}
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = fleetName, id, ln.Addr().String()
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = ttl
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs, JSONFormat: true})
	cfg.Fencers = []fence.Fencer{store}
	for _, d := range dbs {
		cfg.Fencers = append(cfg.Fencers, sqlfence.Fencer{DB: d.db, Fences: d.fences})
	}
	reg := prometheus.NewPedanticRegistry()
	cfg.Metrics = reg
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := ownership.Join(ctx, cli, cfg)
	require.NoError(t, err)
	r, err := router.New(n, router.DefaultConfig())
	require.NoError(t, err)
	write := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, _ := fence.FromContext(req.Context())
		key := req.PathValue("key")
		reqID, err := io.ReadAll(req.Body)
		if err == nil {
			_, err = store.Put(req.Context(), tok, "/restore-data/"+key, []byte(strconv.FormatInt(tok.Epoch, 10)))
		}
		for _, d := range dbs {
			if err != nil {
				break
			}
			err = d.fences.Do(req.Context(), d.db, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(req.Context(), "INSERT INTO writes (req, key, scope, epoch) VALUES ("+d.ph(1)+", "+d.ph(2)+", "+d.ph(3)+", "+d.ph(4)+") ON CONFLICT (req) DO NOTHING",
					string(reqID), key, tok.Scope, tok.Epoch)
				return err
			})
		}
		if err != nil {
			if !router.WriteError(w, req, err) {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h, err := r.Handler(router.KeyFromPathValue("key"), write)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/w/{key}", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	nd := &node{Node: n, reg: reg, logs: logs, srv: srv, r: r}
	t.Cleanup(func() {
		nd.stop()
		if t.Failed() {
			t.Logf("%s's log:\n%s", id, tail(logs.String(), 12000))
		}
	})
	return nd
}

// stop closes the node, its router and its server; it is idempotent.
func (n *node) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx)
	n.r.Close()
	_ = n.Close(ctx)
}

// metric returns the value of the node's metric name.
func (n *node) metric(t *testing.T, name string) float64 {
	t.Helper()
	return testsupport.MustMetric(t, n.reg, name, map[string]string{"node": n.ID()})
}

// load sends writes for keys through a router.Client, counting answers by
// phase.
type load struct {
	mu     sync.Mutex
	phase  string
	ok     map[string]int
	failed map[string]int
	total  atomic.Int64
	acked  []string      // the ids of the acknowledged writes
	wrote  chan struct{} // closed and replaced at each acknowledged write
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(c *router.Client) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{phase: "steady", ok: map[string]int{}, failed: map[string]int{}, wrote: make(chan struct{}), cancel: cancel}
	for w := range workers {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := "k" + strconv.Itoa((w*7919+i)%keys)
				l.send(ctx, c, key, fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	return l
}

func (l *load) send(ctx context.Context, c *router.Client, key, id string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tenure/w/"+key, strings.NewReader(id))
	if err != nil {
		panic(err)
	}
	resp, err := c.Do(ctx, key, req)
	ok := err == nil && resp.StatusCode == http.StatusNoContent
	if err == nil {
		resp.Body.Close()
	}
	if ctx.Err() != nil && !ok {
		// Cut short by the end of the load or its own bound: an outage.
		if errors.Is(context.Cause(ctx), context.Canceled) {
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.ok[l.phase]++
		l.total.Add(1)
		l.acked = append(l.acked, id)
		close(l.wrote)
		l.wrote = make(chan struct{})
	} else {
		l.failed[l.phase]++
	}
}

func (l *load) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// waitWrites waits until n more writes succeeded.
func (l *load) waitWrites(t *testing.T, n int64) {
	t.Helper()
	want := l.total.Load() + n
	require.NoError(t, fleettest.WaitFor(time.Minute, func() error {
		if got := l.total.Load(); got < want {
			return fmt.Errorf("%d of %d writes", got, want)
		}
		return nil
	}, l.written))
}

// written returns a channel closed at the next acknowledged write.
func (l *load) written() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wrote
}

// A fleet under keyed load, with writes fenced in etcd, in SQLite and in
// PostgreSQL, meets
// etcd restored from a snapshot taken before its partitions moved: (c)
// with the --bump-revision that tenurectl rewind-check prints and
// --mark-compacted, etcd back at once (the nodes keep their sessions), the
// fleet serves under the restored etcd's claims; (a) without a bump, etcd
// down for longer than the nodes' outage bound, the nodes name the rewind
// and admit no write below a floor the SQL tables recorded; (b) with the
// bump again, etcd down as long, the fleet serves again. No write is ever
// admitted below a floor: in each SQL table's commit order, the epochs of
// each scope's writes never go down; every acknowledged write has its row
// in each database. tenurectl rewind-check reads both databases' floors.
func TestRestoreUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcdutl and tenurectl and runs etcd member processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	etcdutl, err := cluster.Etcdutl(ctx)
	require.NoError(t, err)
	tenurectl := filepath.Join(t.TempDir(), "tenurectl")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", tenurectl, "github.com/tenure-go/tenure/examples/tenurectl").CombinedOutput()
	require.NoError(t, err, "%s", out)

	ccfg := cluster.DefaultConfig()
	ccfg.Members, ccfg.Processes = 3, true
	etcd := cluster.NewWithConfig(t, ccfg)
	cli := etcd.NewClient(t)

	dbPath := filepath.Join(t.TempDir(), "fleet.db")
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	pg := pgtest.ForTest(t)
	dbs := []sqlStore{
		newSQLStore(ctx, t, "SQLite", db, sqlfence.SQLite, "sqlite:"+dbPath,
			"CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT, req TEXT NOT NULL UNIQUE, key TEXT NOT NULL, scope TEXT NOT NULL, epoch INTEGER NOT NULL)"),
		newSQLStore(ctx, t, "PostgreSQL", pg.DB, sqlfence.Postgres, pg.DSN,
			"CREATE TABLE writes (id BIGSERIAL PRIMARY KEY, req TEXT NOT NULL UNIQUE, key TEXT NOT NULL, scope TEXT NOT NULL, epoch BIGINT NOT NULL)"),
	}

	nodes := []*node{startNode(t, cli, dbs, "a"), startNode(t, cli, dbs, "b"), startNode(t, cli, dbs, "c")}
	owners := func(ns ...*node) []*ownership.Node {
		out := make([]*ownership.Node, len(ns))
		for i, n := range ns {
			out[i] = n.Node
		}
		return out
	}
	waitServed := func(ns ...*node) {
		t.Helper()
		o := owners(ns...)
		require.NoError(t, fleettest.WaitFor(2*time.Minute, func() error { return fleettest.StableAtErr(o, nil) }, fleettest.Changes(o...)...))
	}
	waitServed(nodes...)

	b := router.DefaultBackoff()
	b.MaxAttempts = 20
	client, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: fleetName, Backoff: b})
	require.NoError(t, err)
	defer client.Close()
	l := startLoad(client)
	defer l.stop()
	l.waitWrites(t, 200)

	// The snapshot; then partitions move (c drained and back) under load:
	// epochs and floors rise past the snapshot's revision.
	snap := filepath.Join(t.TempDir(), "snap.db")
	require.NoError(t, etcd.SaveSnapshot(ctx, snap))
	snapRev, err := cluster.SnapshotRevision(ctx, etcdutl, snap)
	require.NoError(t, err)
	l.setPhase("moves")
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: fleetName})
	require.NoError(t, err)
	act := fleet.Action{Actor: "restore-test", Reason: "move partitions after the snapshot"}
	_, err = op.Drain(ctx, "c", act)
	require.NoError(t, err)
	waitServed(nodes[0], nodes[1])
	_, err = op.Undrain(ctx, "c", act)
	require.NoError(t, err)
	waitServed(nodes...)
	l.waitWrites(t, 200)
	for _, d := range dbs {
		var floor int64
		require.NoError(t, d.db.QueryRowContext(ctx, "SELECT MAX(epoch) FROM tenure_fences").Scan(&floor))
		require.Greater(t, floor, snapRev, "the moves raised floors past the snapshot in %s", d.name)
		t.Logf("snapshot at revision %d; %s's highest floor since: %d", snapRev, d.name, floor)
	}

	// tenurectl rewind-check: the bump a restore of the snapshot needs,
	// the larger of the two databases'.
	ctl := func(d sqlStore, args ...string) string {
		out, err := exec.CommandContext(ctx, tenurectl, append([]string{"--endpoints", strings.Join(etcd.Endpoints(), ","), "--timeout", "10s", "rewind-check", "--db", d.spec}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s: %s", d.name, out)
		return string(out)
	}
	var bumped int64
	bumpFor := func() string {
		t.Helper()
		bumped = 0
		for _, d := range dbs {
			var check struct {
				BumpRevision int64 `json:"bump_revision"`
				Rewound      bool  `json:"rewound"`
			}
			require.NoError(t, json.Unmarshal([]byte(ctl(d, "--revision", strconv.FormatInt(snapRev, 10), "--json")), &check))
			require.True(t, check.Rewound, d.name)
			t.Logf("tenurectl rewind-check --db %s: --bump-revision %d", d.name, check.BumpRevision)
			bumped = max(bumped, check.BumpRevision)
		}
		return strconv.FormatInt(bumped, 10)
	}

	// (c) etcd restored with the bump and back at once: the nodes' leases
	// are older than the snapshot, so those that renew in time keep their
	// sessions, and their watches find their revisions compacted.
	l.setPhase("quick")
	bump := bumpFor()
	for i := range etcd.Size() {
		require.NoError(t, etcd.KillMember(i))
	}
	require.NoError(t, etcd.Restore(ctx, etcdutl, snap, "--bump-revision", bump, "--mark-compacted"))
	restored := time.Now()
	l.setPhase("quick-bumped")
	waitServedAtFloors(t, nodes, cli, dbs)
	lost := 0
	for _, n := range nodes {
		lost += strings.Count(n.logs.String(), `"session lost:`)
	}
	t.Logf("(c) restored with --bump-revision %s --mark-compacted, etcd back at once: every partition served at or above its floor %v later; sessions lost: %d of %d",
		bump, time.Since(restored).Round(time.Millisecond), lost, len(nodes))
	l.waitWrites(t, 200)

	// (a) etcd restored without --bump-revision.
	l.setPhase("restore")
	stopEtcd(t, etcd, nodes)
	require.NoError(t, etcd.Restore(ctx, etcdutl, snap))
	restored = time.Now()
	l.setPhase("rewound")
	line := waitLine(t, nodes, "etcd revisions went backwards", time.Minute)
	t.Logf("(a) restored without --bump-revision: %v later, %s logged %q (partitions %v, floor %v, revision %v)",
		time.Since(restored).Round(time.Millisecond), line["node"], line["@message"], line["partitions"], line["floor"], line["revision"])
	for _, n := range nodes {
		if n.ID() == line["node"] {
			assert.Positive(t, n.metric(t, "tenure_fence_rewinds_total"), n.ID())
			assert.Positive(t, n.metric(t, "tenure_partitions_rewound"), n.ID())
		}
	}
	rewound := 0
	for _, n := range nodes {
		st := n.Status()
		for _, rw := range st.Rewound {
			rewound++
			assert.False(t, n.LookupPartition(rw.Partition).Local, "%s serves rewound partition %d", n.ID(), rw.Partition)
			assert.Greater(t, rw.Floor, rw.Revision)
		}
	}
	t.Logf("(a) partitions held back by the rewind, as the nodes' Status says now: %d", rewound)

	for _, d := range dbs {
		t.Logf("tenurectl rewind-check --db %s (the restored etcd):\n%s", d.name, ctl(d))
	}

	// (b) etcd restored again, with the bump tenurectl printed.
	bump = bumpFor()
	l.setPhase("restore")
	stopEtcd(t, etcd, nodes)
	require.NoError(t, etcd.Restore(ctx, etcdutl, snap, "--bump-revision", bump, "--mark-compacted"))
	restored = time.Now()
	l.setPhase("bumped")
	waitServedAtFloors(t, nodes, cli, dbs)
	t.Logf("(b) restored with --bump-revision %s --mark-compacted: every partition served again %v later", bump, time.Since(restored).Round(time.Millisecond))
	before := l.total.Load()
	l.waitWrites(t, 200)
	t.Logf("(b) %d writes since the restore", l.total.Load()-before)
	for _, n := range nodes {
		assert.Empty(t, n.Status().Rewound, n.ID())
		assert.Zero(t, n.metric(t, "tenure_partitions_rewound"), n.ID())
	}

	l.stop()
	for _, n := range nodes {
		n.stop()
	}

	l.mu.Lock()
	acked := slices.Clone(l.acked)
	l.mu.Unlock()
	for _, d := range dbs {
		checkWrites(t, d, acked, snapRev+bumped)
	}
	l.mu.Lock()
	t.Logf("writes acknowledged by phase %v; failed %v", l.ok, l.failed)
	l.mu.Unlock()
}

// waitServedAtFloors waits until the nodes agree on a ring of all of them
// and serve every partition under the claim etcd holds for it, at an epoch
// at or above the floor each SQL database holds for it: after a restore,
// each partition is served under a claim the restored etcd holds and its
// stores admit.
func waitServedAtFloors(t *testing.T, nodes []*node, cli *clientv3.Client, dbs []sqlStore) {
	t.Helper()
	o := make([]*ownership.Node, len(nodes))
	for i, n := range nodes {
		o[i] = n.Node
	}
	require.NoError(t, fleettest.WaitFor(2*time.Minute, func() error {
		if err := fleettest.StableAtErr(o, nil); err != nil {
			return err
		}
		claims := fleettest.EtcdClaims(t, cli, fleetName)
		for p := range partitions {
			for _, d := range dbs {
				var floor int64
				err := d.db.QueryRow("SELECT epoch FROM tenure_fences WHERE scope = "+d.ph(1), fence.PartitionScope(p)).Scan(&floor)
				if err != nil {
					return fmt.Errorf("partition %d's floor in %s: %w", p, d.name, err)
				}
				for _, n := range o {
					if r := n.LookupPartition(p); r.Epoch < floor || r.Epoch != claims[p].Epoch {
						return fmt.Errorf("%s sees partition %d at epoch %d; its floor in %s is %d, its claim's epoch %d", n.ID(), p, r.Epoch, d.name, floor, claims[p].Epoch)
					}
				}
			}
		}
		return nil
	}, fleettest.Changes(o...)...))
}

// stopEtcd kills every etcd member and waits until every node has lost its
// session: etcd is down for longer than the nodes' outage bound, as it is
// while an operator restores it.
func stopEtcd(t *testing.T, etcd *cluster.Cluster, nodes []*node) {
	t.Helper()
	lost := make([]int, len(nodes))
	for i, n := range nodes {
		lost[i] = strings.Count(n.logs.String(), `"session lost`)
	}
	for i := range etcd.Size() {
		require.NoError(t, etcd.KillMember(i))
	}
	for i, n := range nodes {
		want := lost[i] + 1
		require.NoError(t, fleettest.WaitFor(time.Minute, func() error {
			if got := strings.Count(n.logs.String(), `"session lost`); got < want {
				return fmt.Errorf("%s has not lost its session", n.ID())
			}
			return nil
		}, n.logs.Written))
	}
}

// waitLine waits until a node logs a line whose message starts with msg,
// and returns it.
func waitLine(t *testing.T, nodes []*node, msg string, timeout time.Duration) map[string]any {
	t.Helper()
	var found map[string]any
	changes := make([]func() <-chan struct{}, len(nodes))
	for i, n := range nodes {
		changes[i] = n.logs.Written
	}
	err := fleettest.WaitFor(timeout, func() error {
		for _, n := range nodes {
			for _, line := range strings.Split(n.logs.String(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(fmt.Sprint(m["@message"]), msg) {
					found = m
					return nil
				}
			}
		}
		return fmt.Errorf("no node logged %q", msg)
	}, changes...)
	require.NoError(t, err)
	return found
}

// checkWrites checks a SQL database's writes against its floors and the
// acknowledged writes: in commit order, the epochs of each scope's writes
// never go down (no write was admitted below a floor a write had
// recorded), no write's epoch is above its scope's floor, every write
// since the bumped restore carries an epoch above the bumped revision, and
// every acknowledged write has its row (one at most: req is unique).
func checkWrites(t *testing.T, d sqlStore, acked []string, bumped int64) {
	t.Helper()
	ctx := context.Background()
	floors := map[string]int64{}
	rows, err := d.db.QueryContext(ctx, "SELECT scope, epoch FROM tenure_fences")
	require.NoError(t, err)
	for rows.Next() {
		var s string
		var e int64
		require.NoError(t, rows.Scan(&s, &e))
		floors[s] = e
	}
	require.NoError(t, rows.Err())
	rows.Close()

	rows, err = d.db.QueryContext(ctx, "SELECT id, req, scope, epoch FROM writes ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	last := map[string]int64{}
	written := map[string]bool{}
	var n, stale, aboveFloor, afterBump int
	for rows.Next() {
		var id, e int64
		var req, s string
		require.NoError(t, rows.Scan(&id, &req, &s, &e))
		n++
		written[req] = true
		if e < last[s] {
			stale++
			t.Errorf("%s: write %d of %s under epoch %d after a write under epoch %d", d.name, id, s, e, last[s])
		}
		last[s] = max(last[s], e)
		if e > floors[s] {
			aboveFloor++
		}
		if e > bumped {
			afterBump++
		}
	}
	require.NoError(t, rows.Err())
	missing := 0
	for _, req := range acked {
		if !written[req] {
			missing++
		}
	}
	assert.Zero(t, aboveFloor, "%s: writes under an epoch above their scope's floor", d.name)
	assert.Positive(t, afterBump, d.name)
	assert.Zero(t, missing, "%s: acknowledged writes without their row", d.name)
	t.Logf("%s: %d writes for %d acknowledged (%d acknowledged without a row), %d stale (below a floor recorded before them), %d under epochs of the bumped etcd (> %d)",
		d.name, n, len(acked), missing, stale, afterBump, bumped)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
