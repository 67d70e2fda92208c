//go:build unix

package ownership

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// staleStores are the kinds of fenced store a node advances: etcd
// (etcdfence), SQLite and PostgreSQL (sqlfence) and an HTTP service
// (httpfence, whose Handler advances a Gate).
type staleStores struct {
	etcd *etcdfence.Store
	sql  sqlfence.Fencer
	db   *sql.DB
	pg   sqlfence.Fencer
	gate *fence.Gate
	http *httptest.Server
}

func newStaleStores(t *testing.T, etcd *etcdfence.Store) *staleStores {
	t.Helper()
	s := &staleStores{etcd: etcd, gate: &fence.Gate{}}
	s.sql, s.db = openSQLiteFencer(t)
	_, err := s.db.Exec("CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT)")
	require.NoError(t, err)
	pg := pgtest.ForTest(t)
	pgf, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.Postgres})
	require.NoError(t, err)
	require.NoError(t, pgf.CreateTable(context.Background(), pg.DB))
	_, err = pg.DB.Exec("CREATE TABLE data (k TEXT PRIMARY KEY, v TEXT)")
	require.NoError(t, err)
	s.pg = sqlfence.Fencer{DB: pg.DB, Fences: pgf}
	h, err := httpfence.New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		httpfence.Config{Verifier: httpfence.InsecureNoVerify{}, Fencer: s.gate})
	require.NoError(t, err)
	s.http = httptest.NewServer(h)
	t.Cleanup(s.http.Close)
	return s
}

func (s *staleStores) fencers() []fence.Fencer { return []fence.Fencer{s.etcd, s.sql, s.pg, s.gate} }

// requireRefused writes key under tok to each store and requires each
// write refused as stale.
func (s *staleStores) requireRefused(t *testing.T, tok fence.Token, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.etcd.Put(ctx, tok, key, []byte("stale"))
	require.ErrorIs(t, err, fence.ErrStale, "etcdfence, %s under %s", key, tok)
	err = s.sql.Fences.Do(ctx, s.db, tok, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO data (k, v) VALUES (?, 'stale')", key)
		return err
	})
	require.ErrorIs(t, err, fence.ErrStale, "sqlfence (SQLite), %s under %s", key, tok)
	err = s.pg.Fences.Do(ctx, s.pg.DB, tok, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO data (k, v) VALUES ($1, 'stale')", key)
		return err
	})
	require.ErrorIs(t, err, fence.ErrStale, "sqlfence (PostgreSQL), %s under %s", key, tok)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.http.URL+"/"+key, nil)
	require.NoError(t, err)
	require.NoError(t, httpfence.SetHeader(req.Header, tok, fence.Signature{}))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, "httpfence, %s under %s", key, tok)
	require.ErrorIs(t, httpfence.ResponseError(resp), fence.ErrStale)
}

// keyIn returns a key of partition p of n.
func keyIn(p, n int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("key-%d", i); ring.PartitionOf(k, n) == p {
			return k
		}
	}
}

// heldBy returns a partition of the n that b sees id hold, at least min,
// and its holder's token.
func heldBy(t *testing.T, b *Node, id string, n, min int) (int, fence.Token) {
	t.Helper()
	for p := min; p < n; p++ {
		if r := b.LookupPartition(p); r.Owner == id && r.Epoch != 0 {
			return p, fence.Token{Scope: fence.PartitionScope(p), Epoch: r.Epoch}
		}
	}
	t.Fatalf("%s holds no partition in [%d, %d)", id, min, n)
	return 0, fence.Token{}
}

// TestResizeStaleWritesRefused: a parent partition's holder, a node in its
// own process, is frozen (SIGSTOP) before a split of 4 partitions into 8
// and woken after both of its children are served by another node: its
// writes under its token to keys of either child are refused by etcd
// (etcdfence), SQLite and PostgreSQL (sqlfence) and an HTTP service
// (httpfence). The same for a child's holder across the merge back to 4:
// its writes to the merged partition's keys are refused, its scope retired
// at every store by the merged partition's holder (nobody else raises that
// scope after the merge, so without the retirement these writes would be
// admitted).
func TestResizeStaleWritesRefused(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "resize-stale"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	stores := newStaleStores(t, es)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	opts := fleet.ResizeOptions{Actor: "t", Reason: "stale writes"}

	cfg := testConfig(t, name, "b", 4)
	cfg.Fencers = stores.fencers()
	w := startChild(t, c.Endpoints(), name, "w", 4)
	b := join(t, cli, cfg)
	require.NoError(t, waitFor(30*time.Second, func() error { return servedErr(b, "b", "w") }, b))
	q, parent := heldBy(t, b, "w", 4, 0)

	require.NoError(t, w.proc.Stop())
	rep, err := op.Resize(ctx, 8, opts)
	require.NoError(t, err)
	require.True(t, rep.Completed)
	require.NoError(t, waitFor(30*time.Second, func() error {
		for _, p := range []int{q, q + 4} {
			if r := b.LookupPartition(p); !r.Local {
				return fmt.Errorf("child %d not served by b: %+v", p, r)
			}
		}
		return nil
	}, b))
	require.NoError(t, w.proc.Signal(syscall.SIGCONT))
	for _, child := range []int{q, q + 4} {
		stores.requireRefused(t, parent, keyIn(child, 8))
	}
	w.proc.Term(15 * time.Second)

	x := startChild(t, c.Endpoints(), name, "x", 8)
	require.NoError(t, waitFor(30*time.Second, func() error { return servedErr(b, "b", "x") }, b))
	r, src := heldBy(t, b, "x", 8, 4) // a source numbered apart from its merged partition
	require.NoError(t, x.proc.Stop())
	rep, err = op.Resize(ctx, 4, opts)
	require.NoError(t, err)
	require.True(t, rep.Completed)
	require.NoError(t, waitFor(30*time.Second, func() error {
		if got := b.LookupPartition(r - 4); !got.Local {
			return fmt.Errorf("merged partition %d not served by b: %+v", r-4, got)
		}
		return nil
	}, b))
	require.NoError(t, x.proc.Signal(syscall.SIGCONT))
	stores.requireRefused(t, src, keyIn(r-4, 4))
	floor, err := es.Floor(ctx, src.Scope)
	require.NoError(t, err)
	require.Greater(t, floor, src.Epoch, "the merged source's scope is retired (etcd)")
	floor, err = stores.pg.Fences.Floor(ctx, stores.pg.DB, src.Scope)
	require.NoError(t, err)
	require.Greater(t, floor, src.Epoch, "the merged source's scope is retired (PostgreSQL)")
}
