package sqlfence_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

// TestMonotonic: 32 goroutines write with interleaved epochs (some advance
// their scope, some present older epochs). Every accepted write bumps its
// scope's row in a chain table (n = n + 1) in its fenced transaction; the
// row lock orders those updates as the database commits them, so n is the
// database's own commit order per scope. In it, the accepted writes' epochs
// never decrease, no accepted write is lost and no refused write is there.
func TestMonotonic(t *testing.T) {
	const scopes = 4
	cfg := fencetest.Config{Goroutines: 32, PerWriter: 20, Scopes: scopes, Seed: 3}
	for _, e := range engines(t, "mono") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			db.SetMaxOpenConns(cfg.Goroutines)
			freshTable(t, db, "mono_chain", "CREATE TABLE mono_chain (scope TEXT PRIMARY KEY, n BIGINT NOT NULL, epoch BIGINT NOT NULL)")
			for sc := range scopes {
				mustExec(t, db, "INSERT INTO mono_chain (scope, n, epoch) VALUES ("+e.ph(1)+", 0, 0)", fence.PartitionScope(sc))
			}
			bump := "UPDATE mono_chain SET n = n + 1, epoch = " + e.ph(1) + " WHERE scope = " + e.ph(2) + " RETURNING n"

			accepted, refused := fencetest.Interleave(t, cfg, func(_, _ int, tok fence.Token, _ string) (int64, error) {
				var n int64
				err := f.Do(ctx, db, tok, func(tx *sql.Tx) error {
					return tx.QueryRowContext(ctx, bump, tok.Epoch, tok.Scope).Scan(&n)
				})
				return n, err
			})
			byScope := fencetest.CheckOrder(t, accepted)
			for sc := range scopes {
				scope := fence.PartitionScope(sc)
				c := byScope[scope]
				for i, w := range c {
					require.Equal(t, int64(i+1), w.Seq, "scope %s: chain position", scope)
				}
				var n, ep int64
				require.NoError(t, db.QueryRowContext(ctx, "SELECT n, epoch FROM mono_chain WHERE scope = "+e.ph(1), scope).Scan(&n, &ep))
				require.Equal(t, int64(len(c)), n, "scope %s: accepted writes = committed bumps", scope)
				if len(c) > 0 {
					require.Equal(t, c[len(c)-1].Token.Epoch, ep)
				}
			}
			t.Logf("%s: %d accepted, %d refused", e.name, len(accepted), refused)
		})
	}
}
