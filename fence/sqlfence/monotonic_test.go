package sqlfence_test

import (
	"database/sql"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
)

// TestMonotonic: 32 goroutines write with interleaved epochs (some advance
// their scope, some present older epochs). Every accepted write bumps its
// scope's row in a chain table (n = n + 1) in its fenced transaction; the
// row lock orders those updates as the database commits them, so n is the
// database's own commit order per scope. In it, the accepted writes' epochs
// never decrease, no accepted write is lost and no refused write is there.
func TestMonotonic(t *testing.T) {
	const (
		goroutines = 32
		perWriter  = 20
		scopes     = 4
	)
	for _, e := range engines(t, "mono") {
		t.Run(e.name, func(t *testing.T) {
			ctx := testCtx(t)
			f, db := e.fences, e.db
			db.SetMaxOpenConns(goroutines)
			freshTable(t, db, "mono_chain", "CREATE TABLE mono_chain (scope TEXT PRIMARY KEY, n BIGINT NOT NULL, epoch BIGINT NOT NULL)")
			for sc := range scopes {
				mustExec(t, db, "INSERT INTO mono_chain (scope, n, epoch) VALUES ("+e.ph(1)+", 0, 0)", fence.PartitionScope(sc))
			}
			bump := "UPDATE mono_chain SET n = n + 1, epoch = " + e.ph(1) + " WHERE scope = " + e.ph(2) + " RETURNING n"

			var latest [scopes]atomic.Int64
			for i := range latest {
				latest[i].Store(1)
			}
			type accepted struct{ n, epoch int64 }
			var (
				mu      sync.Mutex
				chain   = map[string][]accepted{}
				refused int
			)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 3))
					for range perWriter {
						sc := rng.IntN(scopes)
						var ep int64
						switch r := rng.IntN(10); {
						case r < 2:
							ep = latest[sc].Add(1)
						case r < 6:
							ep = latest[sc].Load()
						default:
							ep = max(1, latest[sc].Load()-int64(rng.IntN(3)))
						}
						tok := fence.Token{Scope: fence.PartitionScope(sc), Epoch: ep}
						var n int64
						err := f.Do(ctx, db, tok, func(tx *sql.Tx) error {
							return tx.QueryRowContext(ctx, bump, ep, tok.Scope).Scan(&n)
						})
						mu.Lock()
						switch {
						case err == nil:
							chain[tok.Scope] = append(chain[tok.Scope], accepted{n, ep})
						case errors.Is(err, fence.ErrStale):
							refused++
						default:
							t.Errorf("goroutine %d: %v", g, err)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Positive(t, refused, "the interleaving produced no stale writes")
			total := 0
			for sc := range scopes {
				scope := fence.PartitionScope(sc)
				c := chain[scope]
				slices.SortFunc(c, func(a, b accepted) int { return int(a.n - b.n) })
				for i, w := range c {
					require.Equal(t, int64(i+1), w.n, "scope %s: chain position", scope)
					if i > 0 {
						require.GreaterOrEqual(t, w.epoch, c[i-1].epoch, "scope %s: epoch %d committed after %d", scope, w.epoch, c[i-1].epoch)
					}
				}
				var n, ep int64
				require.NoError(t, db.QueryRowContext(ctx, "SELECT n, epoch FROM mono_chain WHERE scope = "+e.ph(1), scope).Scan(&n, &ep))
				require.Equal(t, int64(len(c)), n, "scope %s: accepted writes = committed bumps", scope)
				if len(c) > 0 {
					require.Equal(t, c[len(c)-1].epoch, ep)
				}
				total += len(c)
			}
			require.Equal(t, goroutines*perWriter, total+refused)
			t.Logf("%s: %d accepted, %d refused", e.name, total, refused)
		})
	}
}
