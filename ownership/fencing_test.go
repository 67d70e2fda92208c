package ownership

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// openSQLiteFencer opens a SQLite database in a temporary file, with its
// fences table, and returns a fencer on it.
func openSQLiteFencer(t testing.TB) (sqlfence.Fencer, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fences.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	fs, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite})
	require.NoError(t, err)
	require.NoError(t, fs.CreateTable(context.Background(), db))
	return sqlfence.Fencer{DB: db, Fences: fs}, db
}

// perToken hides a fencer's AdvanceAll: the node advances it one token at
// a time.
func perToken(f fence.Fencer) fence.Fencer {
	return fence.FencerFunc(f.Advance)
}

// TestFenceManyPartitionsSQLite measures, side by side in one run, how long
// a node on a SQLite fencer takes from Join to serving 1,024 partitions
// when the fencer advances each partition in a transaction of its own, and
// when it advances every partition acquired together in one (AdvanceAll).
// Every floor is raised to its partition's epoch either way.
func TestFenceManyPartitionsSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: 1,024 partitions, twice")
	}
	const parts = 1024
	c := cluster.New(t, 1)
	run := func(name string, wrap func(fence.Fencer) fence.Fencer) time.Duration {
		f, db := openSQLiteFencer(t)
		cfg := testConfig(t, name, "a", parts)
		cfg.Fencers = []fence.Fencer{wrap(f)}
		start := time.Now()
		n := join(t, c.NewClient(t), cfg)
		require.NoError(t, waitFor(time.Minute, func() error {
			if got := len(n.Owned()); got != parts {
				return fmt.Errorf("%d of %d served", got, parts)
			}
			return nil
		}, n))
		took := time.Since(start)
		var floors int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM "+sqlfence.DefaultConfig().Table).Scan(&floors))
		require.Equal(t, parts, floors)
		for _, p := range []int{0, parts / 2, parts - 1} {
			var e int64
			require.NoError(t, db.QueryRow("SELECT epoch FROM "+sqlfence.DefaultConfig().Table+" WHERE scope = ?", fence.PartitionScope(p)).Scan(&e))
			require.Equal(t, n.LookupPartition(p).Epoch, e)
		}
		closeNode(t, n)
		return took
	}
	each := run("sqlite-each", perToken)
	all := run("sqlite-all", func(f fence.Fencer) fence.Fencer { return f })
	t.Logf("SQLite, %d partitions, Join to all served: per-token Advance %v, AdvanceAll %v (%.1fx faster)",
		parts, each.Round(time.Millisecond), all.Round(time.Millisecond), float64(each)/float64(all))
}

// TestFenceAllStaleFailsOnlyItsPartition: when a partition's floor in the
// store is already above its new epoch, AdvanceAll refuses that token
// only: every other partition acquired with it is served, the stale one
// is not, and once the floor is repaired it is served too.
func TestFenceAllStaleFailsOnlyItsPartition(t *testing.T) {
	const parts, stale = 16, 5
	f, db := openSQLiteFencer(t)
	ctx := context.Background()
	require.NoError(t, f.Advance(ctx, fence.Token{Scope: fence.PartitionScope(stale), Epoch: 1 << 40}))
	calls := make(chan int, 64)
	counting := allFunc{Fencer: f, calls: calls}
	cfg := testConfig(t, "stale-all", "a", parts)
	cfg.Fencers = []fence.Fencer{counting}
	n := join(t, cluster.New(t, 1).NewClient(t), cfg)
	want := seq(parts)
	want = append(want[:stale], want[stale+1:]...)
	servesAll(t, n, want)
	require.NotEmpty(t, calls, "AdvanceAll was not used")
	_, err := n.HoldPartition(stale)
	require.ErrorIs(t, err, ErrNotOwner)

	_, err = db.ExecContext(ctx, "DELETE FROM "+sqlfence.DefaultConfig().Table+" WHERE scope = ?", fence.PartitionScope(stale))
	require.NoError(t, err)
	servesAll(t, n, seq(parts))
}

// allFunc is a fencer with AdvanceAll that counts its calls.
type allFunc struct {
	sqlfence.Fencer
	calls chan int
}

func (a allFunc) AdvanceAll(ctx context.Context, ts []fence.Token) error {
	select {
	case a.calls <- len(ts):
	default:
	}
	return a.Fencer.AdvanceAll(ctx, ts)
}
