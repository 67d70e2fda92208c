package etcdops

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// fleet is three nodes in this process, each with its own etcd client, an
// HTTP server whose handler writes the key's value to etcd through an
// etcdfence.Store and a row to PostgreSQL through sqlfence, both under the
// partition's token, and a router.Client that sends keyed load to them.
type fleet struct {
	t      *testing.T
	etcd   *cluster.Cluster
	pg     *pgtest.DB
	fences *sqlfence.Fences
	name   string
	parts  int
	ttl    time.Duration
	reg    *prometheus.Registry
	nodes  []*ownership.Node
	clis   []*clientv3.Client // the nodes' etcd clients
	client *router.Client
}

// fleetConfig describes a fleet.
type fleetConfig struct {
	name  string
	parts int
	ttl   time.Duration
	// client returns node i's etcd client configuration (nil: the
	// session's ClientConfig over every member).
	client func(i int, sess election.SessionConfig) clientv3.Config
}

// startFleet joins three nodes and waits until every partition is served.
func startFleet(t *testing.T, etcd *cluster.Cluster, fc fleetConfig) *fleet {
	t.Helper()
	f := &fleet{t: t, etcd: etcd, name: fc.name, parts: fc.parts, ttl: fc.ttl, reg: prometheus.NewPedanticRegistry()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.pg = pgtest.ForTest(t)
	var err error
	f.fences, err = sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres})
	require.NoError(t, err)
	require.NoError(t, f.fences.CreateTable(ctx, f.pg.DB))
	_, err = f.pg.DB.ExecContext(ctx, "CREATE TABLE writes (seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, epoch BIGINT NOT NULL)")
	require.NoError(t, err)
	for i := range 3 {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID = fc.name, fmt.Sprintf("n%d", i)
		cfg.Ring.Partitions = fc.parts
		cfg.Session.TTL = fc.ttl
		cfg.Metrics = f.reg
		if testing.Verbose() {
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.NodeID, Level: hclog.Info, Output: testWriter{t}})
		}
		ccfg := cfg.Session.ClientConfig(etcd.Endpoints())
		if fc.client != nil {
			ccfg = fc.client(i, cfg.Session)
		}
		cli, err := clientv3.New(ccfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cli.Close() })
		store, err := etcdfence.New(cli, etcdfence.Config{Cluster: fc.name})
		require.NoError(t, err)
		cfg.Fencers = []fence.Fencer{store, sqlfence.Fencer{DB: f.pg.DB, Fences: f.fences}}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		cfg.Addr = ln.Addr().String()
		n, err := ownership.Join(ctx, cli, cfg)
		require.NoError(t, err)
		rt, err := router.New(n, router.Config{})
		require.NoError(t, err)
		h, err := rt.Handler(router.KeyFromPathValue("key"), writeHandler(store, f.pg.DB, f.fences))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("/k/{key}", h)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(ln) }()
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			_ = srv.Shutdown(cctx)
			<-served
			rt.Close()
			_ = n.Close(cctx)
		})
		f.nodes, f.clis = append(f.nodes, n), append(f.clis, cli)
	}
	f.waitStable()
	ccli, err := clientv3.New(cluster.ClientConfig(etcd.Endpoints()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ccli.Close() })
	f.client, err = router.NewClient(ctx, ccli, router.ClientConfig{Cluster: fc.name, SessionTTL: fc.ttl})
	require.NoError(t, err)
	t.Cleanup(f.client.Close)
	return f
}

// testWriter writes a node's log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// writeHandler writes the request's body, its id, to the key in etcd and
// as a row of PostgreSQL's writes table, both under the request's fencing
// token. A retried request whose row is there already adds none.
func writeHandler(store *etcdfence.Store, db *sql.DB, fences *sqlfence.Fences) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fence.FromContext(r.Context())
		if !ok {
			http.Error(w, "no token", http.StatusInternalServerError)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err == nil {
			_, err = store.Put(r.Context(), tok, "data/"+r.PathValue("key"), body)
		}
		if err == nil {
			err = fences.Do(r.Context(), db, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(r.Context(), "INSERT INTO writes (id, scope, epoch) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
					string(body), tok.Scope, tok.Epoch)
				return err
			})
		}
		if err != nil {
			if !router.WriteError(w, r, err) {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// waitStable waits until every partition is served by one node.
func (f *fleet) waitStable() {
	f.t.Helper()
	fleettest.WaitUntil(f.t, time.Minute, "every partition served", func() (string, <-chan struct{}) {
		why, ch := fleettest.Unstable(f.nodes)
		return why, ch
	})
}

// epochs returns the epoch each partition is served under, from its
// owner's own view.
func (f *fleet) epochs() map[int]int64 {
	f.t.Helper()
	out := make(map[int]int64, f.parts)
	for _, n := range f.nodes {
		for _, p := range n.Owned() {
			out[p] = n.LookupPartition(p).Epoch
		}
	}
	return out
}

// ended returns how many tenures ended, by reason (moved, lost, closed),
// and how many sessions ended, across the nodes.
func (f *fleet) ended() (tenures map[string]float64, sessions float64) {
	f.t.Helper()
	tenures = map[string]float64{}
	for i := range f.nodes {
		node := fmt.Sprintf("n%d", i)
		for _, r := range []string{"moved", "lost", "closed"} {
			v, _ := testsupport.LookupMetric(f.t, f.reg, "tenure_partition_releases_total", map[string]string{"node": node, "reason": r})
			tenures[r] += v
		}
		for _, cause := range []string{"expired", "revoked", "deleted", "closed", "other"} {
			v, _ := testsupport.LookupMetric(f.t, f.reg, "tenure_session_losses_total", map[string]string{"node": node, "cause": cause})
			sessions += v
		}
	}
	return tenures, sessions
}

// request is one request of the load as the client saw it.
type request struct {
	start time.Time
	took  time.Duration
	err   error
}

// load is keyed load: workers goroutines, each sending fenced writes for
// its own keys one after another through the fleet's router.Client.
type load struct {
	mu    sync.Mutex
	reqs  []request
	acked []string // the ids of the acknowledged writes
	stop  context.CancelFunc
	done  sync.WaitGroup
}

// startLoad starts the load; stop ends it.
func (f *fleet) startLoad(workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel}
	for w := range workers {
		l.done.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-k%d", w, i%64)
				id := fmt.Sprintf("w%d-%d", w, i)
				start := time.Now()
				err := f.write(ctx, key, id)
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.reqs = append(l.reqs, request{start: start, took: time.Since(start), err: err})
				if err == nil {
					l.acked = append(l.acked, id)
				}
				l.mu.Unlock()
			}
		})
	}
	f.t.Cleanup(l.end)
	return l
}

func (f *fleet) write(ctx context.Context, key, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tenure/k/"+key, strings.NewReader(id))
	if err != nil {
		return err
	}
	resp, err := f.client.Do(ctx, key, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

// end stops the load and waits for its workers.
func (l *load) end() {
	l.stop()
	l.done.Wait()
}

// window summarizes the requests that started in [from, to).
type window struct {
	name          string
	n, failed     int
	p50, p99, max time.Duration
	firstErr      error
}

func (w window) String() string {
	s := fmt.Sprintf("%-22s %6d requests, %d failed, p50 %v, p99 %v, max %v", w.name, w.n, w.failed,
		w.p50.Round(10*time.Microsecond), w.p99.Round(10*time.Microsecond), w.max.Round(10*time.Microsecond))
	if w.firstErr != nil {
		s += fmt.Sprintf(" (first error: %v)", w.firstErr)
	}
	return s
}

func (l *load) window(name string, from, to time.Time) window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := window{name: name}
	var lat []time.Duration
	for _, r := range l.reqs {
		if r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		w.n++
		if r.err != nil {
			w.failed++
			if w.firstErr == nil {
				w.firstErr = r.err
			}
			continue
		}
		lat = append(lat, r.took)
	}
	if len(lat) == 0 {
		return w
	}
	slices.Sort(lat)
	w.p50, w.p99, w.max = lat[len(lat)/2], lat[(len(lat)*99)/100], lat[len(lat)-1]
	return w
}

// failed returns the number of requests that failed so far, and the first
// error.
func (l *load) failed() (int, error) {
	w := l.window("all", time.Time{}, time.Now().Add(time.Hour))
	return w.failed, w.firstErr
}

// steady waits for d of load and returns its window.
func (l *load) steady(d time.Duration) window {
	from := time.Now()
	time.Sleep(d) // the steady state is a stretch of time under load
	return l.window("steady", from, time.Now())
}

// outcome is what an operation cost the fleet.
type outcome struct {
	tenures       map[string]float64
	sessions      float64
	epochsChanged int
	failed        int
	firstErr      error
	windows       []window
}

func (o outcome) log(t *testing.T) {
	t.Helper()
	for _, w := range o.windows {
		t.Log(w)
	}
	t.Logf("partitions lost %v, moved %v; sessions ended %v; partitions whose epoch changed %d; requests failed %d",
		o.tenures["lost"], o.tenures["moved"], o.sessions, o.epochsChanged, o.failed)
}

// measure returns the cost since before (epochs and counters read then).
func (f *fleet) measure(l *load, before map[int]int64, tenures map[string]float64, sessions float64, windows []window) outcome {
	f.t.Helper()
	now, nowSessions := f.ended()
	o := outcome{tenures: map[string]float64{}, sessions: nowSessions - sessions, windows: windows}
	for r, v := range now {
		o.tenures[r] = v - tenures[r]
	}
	after := f.epochs()
	for p, e := range before {
		if after[p] != e {
			o.epochsChanged++
		}
	}
	o.failed, o.firstErr = l.failed()
	return o
}

// checkWrites checks PostgreSQL's writes table against the load and the
// fences table once the load has ended: every acknowledged write has its
// row (one at most: ids are unique), and no write was admitted below its
// scope's floor: in the order the rows were written (a scope's writes are
// serialized by its fence row), the epochs of each scope's writes never go
// down, and none is above the floor the fences table holds.
func (f *fleet) checkWrites(l *load) {
	f.t.Helper()
	ctx := context.Background()
	floors := map[string]int64{}
	rows, err := f.pg.DB.QueryContext(ctx, "SELECT scope, epoch FROM tenure_fences")
	require.NoError(f.t, err)
	for rows.Next() {
		var s string
		var e int64
		require.NoError(f.t, rows.Scan(&s, &e))
		floors[s] = e
	}
	require.NoError(f.t, rows.Err())
	rows.Close()

	rows, err = f.pg.DB.QueryContext(ctx, "SELECT id, scope, epoch FROM writes ORDER BY seq")
	require.NoError(f.t, err)
	defer rows.Close()
	written := map[string]bool{}
	last := map[string]int64{}
	var stale, aboveFloor int
	for rows.Next() {
		var id, s string
		var e int64
		require.NoError(f.t, rows.Scan(&id, &s, &e))
		written[id] = true
		if e < last[s] {
			stale++
			f.t.Errorf("write %s of %s under epoch %d after a write under epoch %d", id, s, e, last[s])
		}
		last[s] = max(last[s], e)
		if e > floors[s] {
			aboveFloor++
		}
	}
	require.NoError(f.t, rows.Err())
	l.mu.Lock()
	acked := slices.Clone(l.acked)
	l.mu.Unlock()
	missing := 0
	for _, id := range acked {
		if !written[id] {
			missing++
		}
	}
	f.t.Logf("PostgreSQL: %d rows for %d acknowledged writes; %d acknowledged without a row; %d stale (below a floor recorded before them); scopes %d",
		len(written), len(acked), missing, stale, len(last))
	assert.Zero(f.t, missing, "acknowledged writes without their row")
	assert.Zero(f.t, aboveFloor, "writes under an epoch above their scope's floor")
	assert.NotEmpty(f.t, acked)
}
