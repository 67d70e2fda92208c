package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMain is proctest.VerifyTestMain.
func TestMain(m *testing.M) { proctest.VerifyTestMain(m) }

const testPartitions = 16

// TestRollingRestart runs three grpccounter processes on one etcd, sends
// Add (unary) and AddStream (client streaming) calls through a
// grpcroute.Client from several goroutines, and meanwhile restarts every
// process in turn (SIGTERM, start again). No call fails at the caller, and
// every counter holds exactly its acknowledged increments. It runs on each
// store: etcd, and SQLite (--db, with group commit and the warm handoff),
// whose counters table is checked too.
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := proctest.Build(t, "grpccounter")
	t.Run("etcd", func(t *testing.T) { rollingRestart(t, bin, nil) })
	t.Run("sqlite", func(t *testing.T) {
		spec, db, _ := counterdbtest.DB(t, sqlfence.SQLite)
		rollingRestart(t, bin, db, "--db", spec)
	})
}

// rollingRestart is TestRollingRestart on the store of the flags store,
// whose database is db (nil: the etcd store).
func rollingRestart(t *testing.T, bin string, db *sql.DB, store ...string) {
	etcd := cluster.New(t, 1)
	const name = "grpccounter"
	start := func(id string) *proctest.Proc {
		args := append([]string{"--etcd", strings.Join(etcd.Endpoints(), ","), "--cluster", name,
			"--partitions", fmt.Sprint(testPartitions), "--ttl", "2s"}, store...)
		return proctest.Start(t, bin, id, args...)
	}
	ids := []string{"a", "b", "c"}
	procs := map[string]*proctest.Proc{}
	for _, id := range ids {
		procs[id] = start(id)
	}
	cli := etcd.NewClient(t)
	obs := observe(t, cli, name)
	waitServed(t, obs, ids)

	counter, closeClient, err := dial(cli, name, 2*time.Second)
	require.NoError(t, err)
	defer closeClient()

	const keys = 12
	var (
		acked  [keys]atomic.Int64
		failed atomic.Int64
		calls  = make(chan struct{}, 1024)
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		errMu  sync.Mutex
		errs   []error
	)
	call := func(k int, n int64, do func(ctx context.Context, key string) error) {
		key := fmt.Sprintf("k%d", k)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := do(ctx, key)
		cancel()
		select {
		case calls <- struct{}{}:
		default:
		}
		if err != nil {
			failed.Add(1)
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
			return
		}
		acked[k].Add(n)
	}
	loop := func(n int64, do func(ctx context.Context, key string) error) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			call(rand.IntN(keys), n, do)
		}
	}
	add := func(ctx context.Context, key string) error {
		_, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
		return err
	}
	addStream := func(ctx context.Context, key string) error {
		s, err := counter.AddStream(grpcroute.WithKey(ctx, key))
		if err != nil {
			return err
		}
		for range 2 {
			if err := s.Send(&counterpb.AddRequest{Key: key, Delta: 1}); err != nil {
				return err
			}
		}
		_, err = s.CloseAndRecv()
		return err
	}
	for range 3 {
		wg.Go(func() { loop(1, add) })
	}
	wg.Go(func() { loop(2, addStream) })
	flowing := func() {
		t.Helper()
		for i := range 50 {
			select {
			case <-calls:
			case <-time.After(proctest.Wait):
				t.Fatalf("only %d calls completed", i)
			}
		}
	}
	for _, id := range ids {
		flowing()
		if db != nil { // the SQL store's pool, as counterdb.Metrics.WatchPool serves it
			_, err := procs[id].Metric(`go_sql_max_open_connections{db_name="counter"}`)
			assert.NoError(t, err, "%s serves its connection pool's metrics", id)
		}
		procs[id].Stop(t)
		procs[id] = start(id)
		waitServed(t, obs, ids)
	}
	flowing()
	close(stop)
	wg.Wait()

	errMu.Lock()
	require.Zero(t, failed.Load(), "calls failed at the caller: %v", errs)
	errMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
	defer cancel()
	var total int64
	for k := range keys {
		reply, err := counter.Get(ctx, &counterpb.GetRequest{Key: fmt.Sprintf("k%d", k)})
		require.NoError(t, err)
		assert.Equal(t, acked[k].Load(), reply.Value, "key k%d", k)
		total += reply.Value
	}
	t.Logf("%d increments acknowledged and stored once", total)
	for _, id := range ids {
		procs[id].Stop(t)
	}
	if db != nil {
		counters := counterdbtest.Counters(t, db)
		for k := range keys {
			assert.Equal(t, acked[k].Load(), counters[fmt.Sprintf("k%d", k)], "key k%d in the database", k)
		}
	}
}

// observe returns an Observer of fleet name.
func observe(t *testing.T, cli fleet.FleetClient, name string) *fleet.Observer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
	defer cancel()
	var spec, err = fleet.ReadSpec(ctx, cli, fleet.DefaultPrefix(name))
	require.NoError(t, err)
	obs, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: spec.Config()})
	require.NoError(t, err)
	t.Cleanup(obs.Close)
	return obs
}

// waitServed waits until every partition is claimed, by exactly the nodes
// ids between them.
func waitServed(t *testing.T, obs *fleet.Observer, ids []string) {
	t.Helper()
	deadline := time.After(proctest.Wait)
	for {
		ch := obs.Changed()
		var owners []string
		all := true
		for p := range testPartitions {
			r := obs.LookupPartition(p)
			all = all && r.Epoch != 0 && r.Addr != ""
			if !slices.Contains(owners, r.Owner) {
				owners = append(owners, r.Owner)
			}
		}
		slices.Sort(owners)
		if all && slices.Equal(owners, ids) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the fleet does not serve every partition with %v: owners %v", ids, owners)
		}
	}
}
