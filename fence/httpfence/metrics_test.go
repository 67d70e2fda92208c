package httpfence_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestHandlerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var g fence.Gate
	cfg := httpfence.Config{Verifier: httpfence.InsecureNoVerify{}, Fencer: &g, Metrics: reg}
	h, err := httpfence.New(echo, cfg)
	require.NoError(t, err)

	for _, c := range []struct {
		header string
		status int
	}{
		{"p/1@5", http.StatusOK},
		{"p/1@6", http.StatusOK},
		{"p/1@3", http.StatusConflict},      // stale partition token
		{"leader/a@9", http.StatusOK},       // leader scope
		{"leader/a@2", http.StatusConflict}, // stale leader token
		{"jobs/x@4", http.StatusOK},         // other scope
		{"jobs/x@1", http.StatusConflict},   // other scope, stale
		{"p/1@0", http.StatusBadRequest},    // invalid token, not read: other
		{"", http.StatusPreconditionRequired},
	} {
		var w interface{ Result() *http.Response }
		if c.header == "" {
			w = serve(h)
		} else {
			w = serve(h, c.header)
		}
		assert.Equal(t, c.status, w.Result().StatusCode, c.header)
	}

	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 3, "three metric families")
	assert.Equal(t, 4.0, testsupport.MustMetric(t, reg, "tenure_fence_admitted_total", map[string]string{"store": "http"}))
	for kind, n := range map[string]float64{"partition": 1, "leader": 1, "other": 3} {
		assert.Equal(t, n, testsupport.MustMetric(t, reg, "tenure_fence_rejections_total", map[string]string{"store": "http", "scope_kind": kind}), kind)
	}

	// A second Handler on the registry shares the counts.
	h2, err := httpfence.New(echo, cfg)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, serve(h2, "p/1@7").Result().StatusCode)
	assert.Equal(t, 5.0, testsupport.MustMetric(t, reg, "tenure_fence_admitted_total", map[string]string{"store": "http"}))
	assert.Equal(t, 12, testutil.CollectAndCount(reg), "admitted, rejections of 3 scope kinds, verify refusals of 8 reasons")

	// A registry holding a different collector under one of the names.
	clash := prometheus.NewPedanticRegistry()
	require.NoError(t, clash.Register(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tenure_fence_verify_refusals_total", Help: "not the Handler's", ConstLabels: prometheus.Labels{"store": "http"},
	})))
	_, err = httpfence.New(echo, httpfence.Config{Verifier: httpfence.InsecureNoVerify{}, Fencer: &g, Metrics: clash})
	assert.ErrorIs(t, err, httpfence.ErrMetrics)
	assert.Contains(t, err.Error(), "tenure_fence_verify_refusals_total", "the registry's error says which")
}
