package router_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// The routers of two nodes share one registry; a Client has its own. Each
// result is counted exactly.
func TestRouterAndClientMetrics(t *testing.T) {
	etcd := cluster.New(t, 1)
	reg := prometheus.NewPedanticRegistry()
	f := newFleet(t, etcd, "metrics", fleetOptions{Router: router.Config{Metrics: reg}})
	a, b := f.start("a"), f.start("b")
	f.waitStable()
	routed := func(node, result string) float64 {
		return testsupport.MustMetric(t, reg, "tenure_router_requests_total", map[string]string{"node": node, "result": result})
	}

	creg := prometheus.NewPedanticRegistry()
	c := newClient(t, etcd.NewClient(t), routerClientConfig("metrics", creg))
	waitClientAgrees(t, c, f)
	const n = 10
	for i := range n {
		key := "m-" + strconv.Itoa(i)
		resp, err := getVia(context.Background(), c, key, "/k/"+key)
		require.NoError(t, err)
		resp.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := getVia(ctx, c, "m-0", "/k/m-0")
	require.Error(t, err)
	client := func(result string) float64 {
		return testsupport.MustMetric(t, creg, "tenure_client_requests_total", map[string]string{"result": result})
	}
	assert.Equal(t, float64(n), client("ok"))
	assert.Equal(t, 0.0, client("retried"))
	assert.Equal(t, 1.0, client("failed"))
	assert.Equal(t, 0.0, testsupport.MustMetric(t, creg, "tenure_client_retries_total", nil))
	st := c.Stats()
	assert.Equal(t, router.ClientStats{Attempts: n, OK: n, Failed: 1}, st)
	assert.Equal(t, float64(n), routed("a", "served")+routed("b", "served"))

	// A request sent to a for a key b owns is forwarded; one already
	// forwarded is refused.
	var key string
	for i := 0; ; i++ {
		key = "f-" + strconv.Itoa(i)
		if b.node.Lookup(key).Local {
			break
		}
	}
	served := routed("b", "served")
	resp, err := http.Get("http://" + a.addr + "/k/" + key)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1.0, routed("a", "forwarded"))
	assert.Equal(t, served+1, routed("b", "served"))
	req, err := http.NewRequest(http.MethodGet, "http://"+a.addr+"/k/"+key, nil)
	require.NoError(t, err)
	req.Header.Set(router.HeaderForwarded, "x")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	assert.Equal(t, 1.0, routed("a", "refused"))
	assert.Equal(t, 0.0, routed("b", "refused"))

	// A second router of a in the same registry is refused; after Close,
	// one registers again.
	_, err = router.New(a.node, router.Config{Metrics: reg})
	require.ErrorIs(t, err, router.ErrMetrics)
	a.router.Close()
	r2, err := router.New(a.node, router.Config{Metrics: reg})
	require.NoError(t, err)
	assert.Equal(t, 0.0, routed("a", "served"))
	r2.Close()
	assert.Equal(t, 3, testutil.CollectAndCount(reg), "only b's router left")

	c.Close()
	assert.Equal(t, 0, testutil.CollectAndCount(creg), "Close unregisters the client's metrics")

	// A typed nil registerer is refused.
	require.ErrorIs(t, router.Config{Metrics: (*prometheus.Registry)(nil)}.Validate(), router.ErrInvalidConfig)
	require.ErrorIs(t, router.ClientConfig{Cluster: "x", Metrics: (*prometheus.Registry)(nil)}.Validate(), router.ErrInvalidConfig)
}

func routerClientConfig(cluster string, reg prometheus.Registerer) router.ClientConfig {
	return router.ClientConfig{Cluster: cluster, Partitions: 16, Metrics: reg}
}

// A request answered after a retry counts as retried, and its retry in
// tenure_client_retries_total.
func TestClientMetricsRetried(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ff := fleettest.NewHandmade(t, cli, "fakemetrics")
	ff.Spec(8)
	creg := prometheus.NewPedanticRegistry()
	c := newClient(t, cli, router.ClientConfig{Cluster: "fakemetrics", Partitions: 8, Metrics: creg,
		Backoff: router.Backoff{MaxAttempts: 4, Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	var calls atomic.Int64
	addr, _ := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			_ = httpfence.WriteRefusal(w, router.WithHint(&httpfence.Refusal{Kind: httpfence.RefusalNotOwner}, fleet.Route{Partition: 0, Owner: "n", Addr: r.Host}))
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	ff.Member("n", addr)
	key := keyInPartition(c, 0)
	ff.Claim(0, "n")
	fleettest.WaitRoute(t, c, key, addr)
	resp, err := getVia(context.Background(), c, key, "/k/"+key)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1.0, testsupport.MustMetric(t, creg, "tenure_client_requests_total", map[string]string{"result": "retried"}))
	assert.Equal(t, 0.0, testsupport.MustMetric(t, creg, "tenure_client_requests_total", map[string]string{"result": "ok"}))
	assert.Equal(t, 1.0, testsupport.MustMetric(t, creg, "tenure_client_retries_total", nil))
}
