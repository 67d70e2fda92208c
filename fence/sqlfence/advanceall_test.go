package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// partitions returns the tokens of partitions 0..n-1 at epoch.
func partitions(n int, epoch int64) []fence.Token {
	ts := make([]fence.Token, n)
	for i := range ts {
		ts[i] = fence.Token{Scope: fence.PartitionScope(i), Epoch: epoch}
	}
	return ts
}

// requireFloors fails t unless every scope's floor is as given.
func requireFloors(t *testing.T, f *sqlfence.Fences, db *sql.DB, want map[string]int64) {
	t.Helper()
	for scope, e := range want {
		got, err := f.Floor(context.Background(), db, scope)
		require.NoError(t, err)
		require.Equal(t, e, got, "floor of %s", scope)
	}
}

// requireStaleTokens fails t unless err is a *sqlfence.StaleTokensError
// with exactly these stale tokens and this many advanced.
func requireStaleTokens(t *testing.T, err error, advanced int, stale ...fence.StaleError) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrStale)
	var ste *sqlfence.StaleTokensError
	require.ErrorAs(t, err, &ste)
	got := make([]fence.StaleError, len(ste.Stale))
	for i, se := range ste.Stale {
		got[i] = *se
	}
	require.Equal(t, stale, got)
	require.Equal(t, advanced, ste.Advanced)
	var se *fence.StaleError
	require.ErrorAs(t, err, &se, "errors.As finds a *fence.StaleError")
	require.Equal(t, stale[0], *se)
}

func TestAdvanceAll(t *testing.T) {
	for _, e := range engines(t, "all") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			fencer := sqlfence.Fencer{DB: db, Fences: f}
			require.NoError(t, fencer.AdvanceAll(ctx, nil), "nothing to do")

			// More tokens than one statement of either engine holds.
			const many = 9000
			require.NoError(t, fencer.AdvanceAll(ctx, partitions(many, 10)))
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM all_fences WHERE epoch = 10").Scan(&n))
			require.Equal(t, many, n)
			require.NoError(t, fencer.AdvanceAll(ctx, partitions(many, 10)), "idempotent")
			require.NoError(t, fencer.AdvanceAll(ctx, partitions(3, 11)), "raises")
			requireFloors(t, f, db, map[string]int64{"p/0": 11, "p/2": 11, "p/3": 10, "p/8999": 10})

			// Mixed: the fresh tokens are applied, the stale ones named.
			require.NoError(t, fencer.Advance(ctx, fence.Token{Scope: "p/1", Epoch: 20}))
			in := []fence.Token{
				{Scope: "p/3", Epoch: 5}, // below 10
				{Scope: "p/0", Epoch: 12},
				{Scope: "p/1", Epoch: 15}, // below 20
				{Scope: "new", Epoch: 1},
				{Scope: "p/2", Epoch: 11}, // equal: the same owner
			}
			orig := append([]fence.Token(nil), in...)
			err := fencer.AdvanceAll(ctx, in)
			requireStaleTokens(t, err, 3,
				fence.StaleError{Scope: "p/1", Presented: 15, Current: 20},
				fence.StaleError{Scope: "p/3", Presented: 5, Current: 10})
			require.Equal(t, orig, in, "AdvanceAll must not reorder its argument")
			requireFloors(t, f, db, map[string]int64{"p/0": 12, "p/1": 20, "p/2": 11, "p/3": 10, "new": 1})

			// A scope given twice: the highest epoch is applied, a lower one
			// is stale against it, the same token twice is one token.
			err = fencer.AdvanceAll(ctx, []fence.Token{
				{Scope: "p/5", Epoch: 25}, {Scope: "p/5", Epoch: 30}, {Scope: "p/5", Epoch: 30},
				{Scope: "p/1", Epoch: 18}, {Scope: "p/1", Epoch: 17}, // both below 20
			})
			requireStaleTokens(t, err, 2,
				fence.StaleError{Scope: "p/1", Presented: 17, Current: 20},
				fence.StaleError{Scope: "p/1", Presented: 18, Current: 20},
				fence.StaleError{Scope: "p/5", Presented: 25, Current: 30})
			requireFloors(t, f, db, map[string]int64{"p/5": 30, "p/1": 20})

			// Inside the caller's transaction: nothing is recorded until it
			// commits, and a rollback undoes it all.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, f.AdvanceAll(ctx, tx, partitions(600, 40)))
			require.NoError(t, tx.Rollback())
			requireFloors(t, f, db, map[string]int64{"p/0": 12, "p/599": 10})
			tx, err = db.BeginTx(ctx, nil)
			require.NoError(t, err)
			err = f.AdvanceAll(ctx, tx, []fence.Token{{Scope: "p/7", Epoch: 41}, {Scope: "p/1", Epoch: 2}})
			requireStaleTokens(t, err, 1, fence.StaleError{Scope: "p/1", Presented: 2, Current: 20})
			require.NoError(t, tx.Commit())
			requireFloors(t, f, db, map[string]int64{"p/7": 41, "p/1": 20})

			// An invalid token fails the call before anything is applied.
			err = fencer.AdvanceAll(ctx, []fence.Token{{Scope: "p/0", Epoch: 50}, {Scope: "p/9"}})
			require.ErrorIs(t, err, fence.ErrInvalidToken)
			requireFloors(t, f, db, map[string]int64{"p/0": 12})

			// Many stale tokens: every one is named.
			err = fencer.AdvanceAll(ctx, partitions(many, 9))
			var ste *sqlfence.StaleTokensError
			require.ErrorAs(t, err, &ste)
			require.Len(t, ste.Stale, many)
			require.Zero(t, ste.Advanced)
		})
	}
}

// TestAdvanceAllConcurrent: 32 goroutines advance random sets of scopes
// under interleaved epochs, half with Fencer.AdvanceAll and half with
// Fences.AdvanceAll inside a transaction that also bumps a chain row
// (n = n + 1) for every token it advanced. The chain is the database's own
// commit order per scope: in it the advanced epochs never decrease. Every
// refusal names a token below its scope's floor, and every scope ends at the
// highest epoch presented for it.
func TestAdvanceAllConcurrent(t *testing.T) {
	const goroutines, rounds, scopes = 32, 8, 12
	for _, e := range engines(t, "many") {
		t.Run(e.name, func(t *testing.T) {
			ctx := fencetest.Context(t)
			f, db := e.fences, e.db
			db.SetMaxOpenConns(goroutines)
			freshTable(t, db, "many_chain", "CREATE TABLE many_chain (scope TEXT PRIMARY KEY, n BIGINT NOT NULL, epoch BIGINT NOT NULL)")
			for sc := range scopes {
				mustExec(t, db, "INSERT INTO many_chain (scope, n, epoch) VALUES ("+e.ph(1)+", 0, 0)", fence.PartitionScope(sc))
			}
			bump := "UPDATE many_chain SET n = n + 1, epoch = " + e.ph(1) + " WHERE scope = " + e.ph(2) + " RETURNING n"
			fencer := sqlfence.Fencer{DB: db, Fences: f}

			// chained advances ts in a transaction and bumps the chain of
			// every token advanced, returning each one's chain position.
			chained := func(ts []fence.Token) (map[fence.Token]int64, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return nil, err
				}
				defer func() { _ = tx.Rollback() }()
				aerr := f.AdvanceAll(ctx, tx, ts)
				stale := map[fence.Token]bool{}
				var ste *sqlfence.StaleTokensError
				switch {
				case errors.As(aerr, &ste):
					for _, se := range ste.Stale {
						stale[fence.Token{Scope: se.Scope, Epoch: se.Presented}] = true
					}
				case aerr != nil:
					return nil, aerr
				}
				seqs := map[fence.Token]int64{}
				for _, tok := range ts { // distinct scopes, in any order
					if stale[tok] {
						continue
					}
					var n int64
					if err := tx.QueryRowContext(ctx, bump, tok.Epoch, tok.Scope).Scan(&n); err != nil {
						return nil, err
					}
					seqs[tok] = n
				}
				if err := tx.Commit(); err != nil {
					return nil, err
				}
				return seqs, aerr
			}

			latest := make([]atomic.Int64, scopes)
			for i := range latest {
				latest[i].Store(1)
			}
			var (
				mu        sync.Mutex
				chain     []fencetest.Write
				highest   = map[string]int64{}
				advanced  int
				refusedOK int
				wg        sync.WaitGroup
			)
			for g := range goroutines {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for i := range rounds {
						var ts []fence.Token
						for _, sc := range rng.Perm(scopes)[:1+rng.IntN(scopes)] {
							var ep int64
							switch r := rng.IntN(10); {
							case r < 2: // a new owner takes over
								ep = latest[sc].Add(1)
							case r < 6: // the current owner continues
								ep = latest[sc].Load()
							default: // an older owner, possibly superseded
								ep = max(1, latest[sc].Load()-int64(rng.IntN(3)))
							}
							ts = append(ts, fence.Token{Scope: fence.PartitionScope(sc), Epoch: ep})
						}
						var seqs map[fence.Token]int64
						var err error
						if g%2 == 0 {
							err = fencer.AdvanceAll(ctx, ts)
						} else {
							seqs, err = chained(ts)
						}
						var ste *sqlfence.StaleTokensError
						if err != nil && !errors.As(err, &ste) {
							t.Errorf("goroutine %d round %d: %v", g, i, err)
							continue
						}
						mu.Lock()
						for _, tok := range ts {
							highest[tok.Scope] = max(highest[tok.Scope], tok.Epoch)
							if n, ok := seqs[tok]; ok {
								chain = append(chain, fencetest.Write{ID: fmt.Sprintf("g%d-%d", g, i), Token: tok, Seq: n})
							}
						}
						advanced += len(ts)
						if ste != nil {
							advanced -= len(ste.Stale)
							for _, se := range ste.Stale {
								if se.Presented >= se.Current {
									t.Errorf("refusal of %s@%d: current epoch %d is not newer", se.Scope, se.Presented, se.Current)
								}
								refusedOK++
							}
							if ste.Advanced != len(ts)-len(ste.Stale) {
								t.Errorf("Advanced = %d, want %d", ste.Advanced, len(ts)-len(ste.Stale))
							}
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Positive(t, advanced)
			require.Positive(t, refusedOK, "the interleaving refused nothing")
			byScope := fencetest.CheckOrder(t, chain)
			for sc := range scopes {
				scope := fence.PartitionScope(sc)
				for i, w := range byScope[scope] {
					require.Equal(t, int64(i+1), w.Seq, "scope %s: chain position", scope)
				}
			}
			requireFloors(t, f, db, highest)
			t.Logf("%s: %d tokens advanced, %d refused, %d chained writes", e.name, advanced, refusedOK, len(chain))
		})
	}
}
