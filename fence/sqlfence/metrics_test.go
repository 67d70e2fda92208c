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
// decides one, on SQLite, with two Fences sharing one registry (each
// counts into the same collectors); a typed nil registry and a registry
// holding another metric of the same name are refused.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	_, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: (*prometheus.Registry)(nil)})
	require.ErrorIs(t, err, sqlfence.ErrInvalidConfig)
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "tenure_fence_admitted_total", Help: "not a counter"}))
	_, err = sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: clash})
	require.ErrorIs(t, err, sqlfence.ErrMetrics)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	f, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: reg})
	require.NoError(t, err)
	f2, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: reg})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.CreateTable(ctx, db))
	fencer := sqlfence.Fencer{DB: db, Fences: f}
	fencer2 := sqlfence.Fencer{DB: db, Fences: f2}

	tok := func(scope string, e int64) fence.Token { return fence.Token{Scope: scope, Epoch: e} }
	require.NoError(t, fencer.Advance(ctx, tok("p/1", 5)))                             // admitted 1
	require.ErrorIs(t, fencer.Advance(ctx, tok("p/1", 3)), fence.ErrStale)             // partition 1
	require.ErrorIs(t, fencer.Advance(ctx, tok("leader/x", 0)), fence.ErrInvalidToken) // not decided: not counted
	require.NoError(t, fencer.Advance(ctx, tok("leader/x", 2)))                        // admitted 2
	err = fencer.AdvanceAll(ctx, []fence.Token{tok("p/1", 4), tok("p/2", 1), tok("p/3", 1)})
	require.ErrorIs(t, err, fence.ErrStale)                                      // admitted 4, partition 2
	require.ErrorIs(t, fencer2.Advance(ctx, tok("leader/x", 1)), fence.ErrStale) // leader 1, through the second Fences

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
}
