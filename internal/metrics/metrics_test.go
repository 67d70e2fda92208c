package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/metrics"
)

func TestScopeKind(t *testing.T) {
	for scope, want := range map[string]string{
		fence.PartitionScope(17): metrics.ScopeKindPartition,
		fence.LeaderScope("a"):   metrics.ScopeKindLeader,
		"jobs/x":                 metrics.ScopeKindOther,
		"":                       metrics.ScopeKindOther,
		"leader":                 metrics.ScopeKindOther,
		"p":                      metrics.ScopeKindOther,
	} {
		assert.Equal(t, want, metrics.ScopeKind(scope), scope)
	}
}

func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	b := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "b"})
	set, err := metrics.Register(reg, b)
	require.NoError(t, err)
	_, err = metrics.Register(reg, a, prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "b"}))
	require.Error(t, err)
	assert.True(t, metrics.IsAlreadyRegistered(err))
	assert.Equal(t, 1, testutil.CollectAndCount(reg), "a was unregistered when b failed")
	set.Unregister()
	set.Unregister()
	(*metrics.Set)(nil).Unregister()
	_, err = metrics.Register(reg, a, b)
	require.NoError(t, err)
	assert.Equal(t, 2, testutil.CollectAndCount(reg))
}

// Stores of several kinds export the fence metrics into one registry.
func TestFenceMetricsShareRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, store := range []string{"http", "etcd", "sql"} {
		_, err := metrics.Register(reg, metrics.FenceAdmitted(store), metrics.FenceRejections(store))
		require.NoError(t, err, store)
	}
	assert.Equal(t, 3+3*len(metrics.ScopeKinds), testutil.CollectAndCount(reg))
}
