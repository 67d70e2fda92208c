package router_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// resizeStores are the fenced stores of TestResizeUnderLoad: each
// increment is written, under the token of its partition's tenure, as one
// key per increment (its idempotency key) to etcd through etcdfence and as
// one row per increment to SQLite through sqlfence, so that a write
// repeated by a retry lands on the same key and row.
type resizeStores struct {
	etcd *etcdfence.Store
	sql  sqlfence.Fencer
	db   *sql.DB
	cli  *clientv3.Client

	stale atomic.Int64 // writes refused as stale (a tenure that ended; the Client retries them)
}

func newResizeStores(t *testing.T, cli *clientv3.Client, cluster string) *resizeStores {
	t.Helper()
	es, err := etcdfence.New(cli, etcdfence.Config{Cluster: cluster})
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "counter.db")+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	fs, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, fs.CreateTable(ctx, db))
	_, err = db.ExecContext(ctx, "CREATE TABLE incs (idem TEXT PRIMARY KEY, k TEXT NOT NULL)")
	require.NoError(t, err)
	return &resizeStores{etcd: es, sql: sqlfence.Fencer{DB: db, Fences: fs}, db: db, cli: cli}
}

func (s *resizeStores) fencers() []fence.Fencer { return []fence.Fencer{s.etcd, s.sql} }

// handler writes the increment of the request's key to both stores under
// the token of the tenure that admitted it; a stale token is a retryable
// refusal.
func (s *resizeStores) handler(m *member) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, idem := r.PathValue("key"), r.Header.Get(router.HeaderIdempotencyKey)
		tok, ok := fence.FromContext(r.Context())
		if !ok || idem == "" {
			http.Error(w, "no token or idempotency key", http.StatusBadRequest)
			return
		}
		if p := m.node.Lookup(key).Partition; tok.Scope != fence.PartitionScope(p) {
			http.Error(w, fmt.Sprintf("token %s for key %s of partition %d", tok, key, p), http.StatusInternalServerError)
			return
		}
		_, err := s.etcd.Put(r.Context(), tok, "counter/"+idem, []byte(key))
		if err == nil {
			err = s.sql.Fences.Do(r.Context(), s.db, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(r.Context(), "INSERT INTO incs (idem, k) VALUES (?, ?) ON CONFLICT (idem) DO NOTHING", idem, key)
				return err
			})
		}
		switch {
		case errors.Is(err, fence.ErrStale):
			s.stale.Add(1)
			router.WriteError(w, r, err)
		case err != nil && router.WriteError(w, r, err):
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			io.WriteString(w, "applied")
		}
	})
}

// counted returns the increments each store holds, by idempotency key.
func (s *resizeStores) counted(t *testing.T) (etcd, sqlite map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, "counter/", clientv3.WithPrefix())
	require.NoError(t, err)
	etcd = map[string]string{}
	for _, kv := range resp.Kvs {
		etcd[strings.TrimPrefix(string(kv.Key), "counter/")] = string(kv.Value)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT idem, k FROM incs")
	require.NoError(t, err)
	defer rows.Close()
	sqlite = map[string]string{}
	for rows.Next() {
		var idem, k string
		require.NoError(t, rows.Scan(&idem, &k))
		sqlite[idem] = k
	}
	require.NoError(t, rows.Err())
	return etcd, sqlite
}

// writeCounter counts the distinct revisions of the writes under a fleet's
// prefix, by kind: ownership (claims, resize keys, spec, placements,
// audit records) and fences (floors).
type writeCounter struct {
	mu        sync.Mutex
	ownership map[int64]bool
	fences    map[int64]bool
}

func countWrites(t *testing.T, cli *clientv3.Client, prefix string, from int64) *writeCounter {
	w := &writeCounter{ownership: map[int64]bool{}, fences: map[int64]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for resp := range wch {
			w.mu.Lock()
			for _, ev := range resp.Events {
				k := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				switch {
				case strings.HasPrefix(k, "fence/"):
					w.fences[ev.Kv.ModRevision] = true
				case strings.HasPrefix(k, "claims/"), k == "spec", strings.HasPrefix(k, "placement"), strings.HasPrefix(k, "audit/"):
					w.ownership[ev.Kv.ModRevision] = true
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// between returns the ownership and fence writes at revisions in (a, b].
func (w *writeCounter) between(a, b int64) (own, fences int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := range w.ownership {
		if r > a && r <= b {
			own++
		}
	}
	for r := range w.fences {
		if r > a && r <= b {
			fences++
		}
	}
	return own, fences
}

// TestResizeUnderLoad resizes a fleet of three nodes from 64 partitions
// to 256, 1,024 and back to 256 while keyed increments run through a
// router.Client, each retried with its idempotency key until acknowledged,
// against two fenced stores (etcd through etcdfence, SQLite through
// sqlfence): no request fails at the caller, every acknowledged increment
// is in both stores exactly once and nothing else is, and after each
// resize the nodes and the Client name the same partition, by the new
// count, and the same holder for every sampled key. It logs the time each
// resize took and its etcd writes (the driver's and the nodes').
func TestResizeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("three resizes under load")
	}
	const (
		name    = "resize-load"
		workers = 8
		nkeys   = 512
	)
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	stores := newResizeStores(t, cli, name)
	f := newFleet(t, etcd, name, fleetOptions{Partitions: 64, Fencers: stores.fencers(), Handler: stores.handler})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: name})
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	start, err := cli.Get(context.Background(), "counter-start")
	require.NoError(t, err)
	writes := countWrites(t, cli, fleet.DefaultPrefix(name), start.Header.Revision+1)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		next   atomic.Int64
		failed atomic.Int64 // attempts that failed at the caller
		stop   = make(chan struct{})
		mu     sync.Mutex
		acked  = map[string]string{} // idempotency key -> key
		lost   []string
		wg     sync.WaitGroup
	)
	increment := func(key, idem string) bool {
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+key, http.NoBody)
			if err != nil {
				panic(err) // a constant URL
			}
			req.Header.Set(router.HeaderIdempotencyKey, idem)
			resp, err := c.Do(ctx, key, req)
			if err != nil {
				failed.Add(1)
				t.Logf("increment %s of %s: %v", idem, key, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
			failed.Add(1)
			t.Logf("increment %s of %s: %d %s", idem, key, resp.StatusCode, body)
		}
		return false
	}
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1) - 1
				key, idem := "key-"+strconv.FormatInt(i%nkeys, 10), "inc-"+strconv.FormatInt(i, 10)
				ok := increment(key, idem)
				mu.Lock()
				if ok {
					acked[idem] = key
				} else {
					lost = append(lost, idem)
				}
				mu.Unlock()
			}
		})
	}
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer stopLoad()

	sample := make([]string, 256)
	for i := range sample {
		sample[i] = "sample-" + strconv.Itoa(i)
	}
	agree := func(count int) string {
		for _, key := range sample {
			want := c.Lookup(key)
			if want.Partition != ring.PartitionOf(key, count) || want.Epoch == 0 {
				return fmt.Sprintf("%s: client names partition %d (epoch %d), want %d", key, want.Partition, want.Epoch, ring.PartitionOf(key, count))
			}
			for _, m := range f.list() {
				if got := m.node.Lookup(key); got.Partition != want.Partition || got.Owner != want.Owner || got.Epoch != want.Epoch {
					return fmt.Sprintf("%s: %s names %d %s@%d, the client %d %s@%d", key, m.id, got.Partition, got.Owner, got.Epoch,
						want.Partition, want.Owner, want.Epoch)
				}
			}
		}
		return ""
	}
	for _, step := range []struct{ to, budget int }{{256, 16}, {1024, 64}, {256, 64}} {
		before := next.Load()
		begin, err := cli.Get(ctx, "counter-begin")
		require.NoError(t, err)
		rep, err := op.Resize(ctx, step.to, fleet.ResizeOptions{Actor: "test", Reason: "under load", Budget: step.budget})
		if err != nil {
			st, _ := op.ResizeStatus(context.Background())
			ps, _ := op.Partitions(context.Background())
			t.Logf("resize status when it failed: %+v; partitions %+v", st, ps)
		}
		require.NoError(t, err)
		require.True(t, rep.Completed)
		end, err := cli.Get(ctx, "counter-end")
		require.NoError(t, err)
		f.waitStable()
		waitUntil(t, 30*time.Second, "the client and the nodes agree", func() (string, <-chan struct{}) {
			// Any of them may be the last to change: the channels are
			// taken before the check, so that no change goes unseen.
			chs := []<-chan struct{}{c.Changed()}
			for _, m := range f.list() {
				chs = append(chs, m.node.Changed())
			}
			ch := either(t, chs...)
			return agree(step.to), ch
		})
		own, fences := writes.between(begin.Header.Revision, end.Header.Revision)
		t.Logf("resize %d -> %d (budget %d, %d groups): took %v; etcd writes: %d by the driver, %d ownership revisions (driver and nodes), %d fence floors; %d increments issued meanwhile",
			rep.From, rep.To, step.budget, rep.Groups, time.Duration(rep.Took).Round(time.Millisecond),
			rep.Writes, own, fences, next.Load()-before)
	}
	stopLoad()

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, lost)
	require.Zero(t, failed.Load(), "requests failed at the caller")
	etcdCounts, sqlCounts := stores.counted(t)
	for idem, key := range acked {
		require.Equal(t, key, etcdCounts[idem], "etcd holds acknowledged increment %s", idem)
		require.Equal(t, key, sqlCounts[idem], "SQLite holds acknowledged increment %s", idem)
	}
	require.Len(t, etcdCounts, len(acked), "etcd holds only acknowledged increments")
	require.Len(t, sqlCounts, len(acked), "SQLite holds only acknowledged increments")
	t.Logf("%d increments acknowledged, each once in both stores; 0 failed at the caller; %d writes refused as stale at the stores and retried",
		len(acked), stores.stale.Load())
}
