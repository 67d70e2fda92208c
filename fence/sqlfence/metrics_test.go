package sqlfence_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// TestMetrics counts admitted and stale tokens through every path that
// decides one, on SQLite, and shares a registry with a second Metrics only
// after the first is unregistered.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := sqlfence.NewMetrics(reg)
	require.NoError(t, err)
	_, err = sqlfence.NewMetrics(reg)
	require.ErrorIs(t, err, sqlfence.ErrMetrics)
	_, err = sqlfence.NewMetrics((*prometheus.Registry)(nil))
	require.ErrorIs(t, err, sqlfence.ErrNilArgument)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: m})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.CreateTable(ctx, db))
	fencer := sqlfence.Fencer{DB: db, Fences: f}

	tok := func(scope string, e int64) fence.Token { return fence.Token{Scope: scope, Epoch: e} }
	require.NoError(t, fencer.Advance(ctx, tok("p/1", 5)))                             // admitted 1
	require.ErrorIs(t, fencer.Advance(ctx, tok("p/1", 3)), fence.ErrStale)             // partition 1
	require.ErrorIs(t, fencer.Advance(ctx, tok("leader/x", 0)), fence.ErrInvalidToken) // not decided: not counted
	require.NoError(t, fencer.Advance(ctx, tok("leader/x", 2)))                        // admitted 2
	err = fencer.AdvanceAll(ctx, []fence.Token{tok("p/1", 4), tok("p/2", 1), tok("p/3", 1)})
	require.ErrorIs(t, err, fence.ErrStale)                                     // admitted 4, partition 2
	require.ErrorIs(t, fencer.Advance(ctx, tok("leader/x", 1)), fence.ErrStale) // leader 1

	want := `
# HELP tenure_fence_admitted_total Tokens the fence admitted, by store kind.
# TYPE tenure_fence_admitted_total counter
tenure_fence_admitted_total{store="sql"} 4
# HELP tenure_fence_rejections_total Tokens or requests the fence refused (stale, invalid or missing token, or the fence could not decide), by store kind and the kind of the token's scope.
# TYPE tenure_fence_rejections_total counter
tenure_fence_rejections_total{scope_kind="leader",store="sql"} 1
tenure_fence_rejections_total{scope_kind="other",store="sql"} 0
tenure_fence_rejections_total{scope_kind="partition",store="sql"} 2
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))

	m.Unregister()
	m.Unregister()
	m2, err := sqlfence.NewMetrics(reg)
	require.NoError(t, err)
	m2.Unregister()
}
