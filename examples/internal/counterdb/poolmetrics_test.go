package counterdb_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/examples/internal/counterdb/counterdbtest"
	"github.com/tenure-go/tenure/internal/testsupport"
)

// TestPoolMetricsShowAWait holds every connection of the pool while a
// query asks for one, on each database: the pool's metrics show the
// connections in use while they are held, and one wait, with its time,
// once the query has had its connection.
func TestPoolMetricsShowAWait(t *testing.T) {
	for _, d := range counterdbtest.Dialects() {
		t.Run(d.String(), func(t *testing.T) {
			_, db, _ := counterdbtest.DB(t, d)
			m := counterdb.NewMetrics()
			if err := m.WatchPool(db); err != nil {
				t.Fatal(err)
			}
			if err := m.WatchPool(db); err == nil {
				t.Error("a registry watched a second pool")
			}
			ctx := t.Context()
			pool := map[string]string{"db_name": counterdb.PoolName}
			conns := db.Stats().MaxOpenConnections
			if got := testsupport.MustMetric(t, m.Registry, "go_sql_max_open_connections", pool); got != float64(conns) {
				t.Fatalf("go_sql_max_open_connections %v, the pool's bound is %d", got, conns)
			}
			held := make([]*sql.Conn, 0, conns)
			release := func() {
				for _, c := range held {
					_ = c.Close()
				}
				held = held[:0]
			}
			defer release()
			for range conns {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			if got := testsupport.MustMetric(t, m.Registry, "go_sql_in_use_connections", pool); got != float64(conns) {
				t.Errorf("go_sql_in_use_connections %v with all %d held", got, conns)
			}

			done := make(chan error, 1)
			go func() {
				var one int
				done <- db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
			}()
			// The query counts as waiting once it has asked the pool.
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for db.Stats().WaitCount == 0 {
				select {
				case <-tick.C:
				case err := <-done:
					t.Fatalf("the query ran with every connection held: %v", err)
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
			}
			release()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the query did not get the connection released to it")
			}
			if got := testsupport.MustMetric(t, m.Registry, "go_sql_wait_count_total", pool); got != 1 {
				t.Errorf("go_sql_wait_count_total %v after one wait", got)
			}
			if got := testsupport.MustMetric(t, m.Registry, "go_sql_wait_duration_seconds_total", pool); got <= 0 {
				t.Errorf("go_sql_wait_duration_seconds_total %v after a wait", got)
			}
		})
	}
}
