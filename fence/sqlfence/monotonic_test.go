package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestMonotonic: 32 goroutines write with interleaved epochs (some advance
// their scope, some present older epochs). Every accepted write bumps its
// scope's row in a chain table (n = n + 1) in its fenced transaction; the
// row lock orders those updates as the database commits them, so n is the
// database's own commit order per scope. In it, the accepted writes' epochs
// never decrease, no accepted write is lost and no refused write is there.
// It runs once with the check and the write in two statements (Do) and
// once in one (ExecGuarded).
func TestMonotonic(t *testing.T) {
	const scopes = 4
	cfg := fencetest.Config{Goroutines: 32, PerWriter: 20, Scopes: scopes, Seed: 3}
	for _, e := range engines(t, "mono") {
		bump := "UPDATE mono_chain SET n = n + 1, epoch = " + e.ph(1) + " WHERE scope = " + e.ph(2) + " RETURNING n"
		guardedBump := "UPDATE mono_chain SET n = n + 1, epoch = " + e.ph(1) + " WHERE scope = " + e.ph(2) + " AND EXISTS (SELECT 1 FROM tenure_fence)"
		readN := "SELECT n FROM mono_chain WHERE scope = " + e.ph(1)
		for _, form := range []struct {
			name  string
			write func(ctx context.Context, f *sqlfence.Fences, db *sql.DB, tok fence.Token) (int64, error)
		}{
			{"Do", func(ctx context.Context, f *sqlfence.Fences, db *sql.DB, tok fence.Token) (int64, error) {
				var n int64
				err := f.Do(ctx, db, tok, func(tx *sql.Tx) error {
					return tx.QueryRowContext(ctx, bump, tok.Epoch, tok.Scope).Scan(&n)
				})
				return n, err
			}},
			{"ExecGuarded", func(ctx context.Context, f *sqlfence.Fences, db *sql.DB, tok fence.Token) (int64, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return 0, err
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := f.ExecGuarded(ctx, tx, tok, guardedBump, tok.Epoch, tok.Scope); err != nil {
					return 0, err
				}
				var n int64 // our own bump: the row stays locked until commit
				if err := tx.QueryRowContext(ctx, readN, tok.Scope).Scan(&n); err != nil {
					return 0, err
				}
				return n, tx.Commit()
			}},
		} {
			t.Run(e.name+"/"+form.name, func(t *testing.T) {
				ctx := fencetest.Context(t)
				f, db := e.fences, e.db
				db.SetMaxOpenConns(cfg.Goroutines)
				mustExec(t, db, "DELETE FROM mono_fences")
				freshTable(t, db, "mono_chain", "CREATE TABLE mono_chain (scope TEXT PRIMARY KEY, n BIGINT NOT NULL, epoch BIGINT NOT NULL)")
				for sc := range scopes {
					mustExec(t, db, "INSERT INTO mono_chain (scope, n, epoch) VALUES ("+e.ph(1)+", 0, 0)", fence.PartitionScope(sc))
				}
				accepted, refused := fencetest.Interleave(t, cfg, func(_, _ int, tok fence.Token, _ string) (int64, error) {
					return form.write(ctx, f, db, tok)
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
				t.Logf("%s/%s: %d accepted, %d refused", e.name, form.name, len(accepted), refused)
			})
		}
	}
}
