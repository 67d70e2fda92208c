package etcdfence_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

// TestMetrics counts admitted and refused tokens through a write, Advance,
// Get, a refusal by etcd, refusals from the Store's floor cache and a
// Commit; a second Store given the same registry counts into the same
// metrics.
func TestMetrics(t *testing.T) {
	cli := startCluster(t)
	cfg := etcdfence.DefaultConfig()
	cfg.Cluster = "metrics"

	cfg.Metrics = (*prometheus.Registry)(nil)
	_, err := etcdfence.New(cli, cfg)
	require.ErrorIs(t, err, etcdfence.ErrNilArgument)
	clash := prometheus.NewPedanticRegistry()
	clash.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "tenure_fence_admitted_total", Help: "another meaning"}))
	cfg.Metrics = clash
	_, err = etcdfence.New(cli, cfg)
	require.ErrorIs(t, err, etcdfence.ErrMetrics)

	cfg.Metrics = nil
	s, err := etcdfence.New(cli, cfg) // no metrics
	require.NoError(t, err)
	other := s
	reg := prometheus.NewPedanticRegistry()
	cfg.Metrics = reg
	s, err = etcdfence.New(cli, cfg)
	require.NoError(t, err)
	ctx := fencetest.Context(t)

	old, cur := fence.Token{Scope: "p/1", Epoch: 3}, fence.Token{Scope: "p/1", Epoch: 5}
	_, err = s.Put(ctx, old, "k", []byte("a")) // admitted 1
	require.NoError(t, err)
	require.NoError(t, other.Advance(ctx, cur)) // not counted: another Store
	_, err = s.Put(ctx, old, "k", []byte("b"))  // refused by etcd: partition 1
	require.ErrorIs(t, err, fence.ErrStale)
	_, err = s.Get(ctx, old, "k") // refused by the cached floor: partition 2
	require.ErrorIs(t, err, fence.ErrStale)
	require.NoError(t, s.Advance(ctx, fence.Token{Scope: "leader/job", Epoch: 9})) // admitted 2
	_, err = s.Get(ctx, cur, "k")                                                  // admitted 3
	require.NoError(t, err)
	// A Commit: the stale write is refused by the cached floor (partition
	// 3, counted once), its neighbour admitted (4).
	res, err := s.Commit(ctx, []etcdfence.Write{{Kind: etcdfence.KindPut, Token: old, Key: "k", Value: []byte("c")}, {Kind: etcdfence.KindPut, Token: cur, Key: "k2", Value: []byte("d")}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, fence.ErrStale)
	require.NoError(t, res[1].Err)

	want := `
# HELP tenure_fence_admitted_total Tokens the fence admitted, by store kind.
# TYPE tenure_fence_admitted_total counter
tenure_fence_admitted_total{store="etcd"} 4
# HELP tenure_fence_rejections_total Tokens or requests the fence refused (stale, invalid or missing token, or the fence could not decide), by store kind and the kind of the token's scope.
# TYPE tenure_fence_rejections_total counter
tenure_fence_rejections_total{scope_kind="leader",store="etcd"} 0
tenure_fence_rejections_total{scope_kind="other",store="etcd"} 0
tenure_fence_rejections_total{scope_kind="partition",store="etcd"} 3
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))

	twin, err := etcdfence.New(cli, cfg) // the same registry: shared counts
	require.NoError(t, err)
	_, err = twin.Put(ctx, cur, "k3", []byte("e")) // admitted 5
	require.NoError(t, err)
	want = strings.Replace(want, `tenure_fence_admitted_total{store="etcd"} 4`, `tenure_fence_admitted_total{store="etcd"} 5`, 1)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}
