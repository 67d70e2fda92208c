package router

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
)

// The metrics of a Router (Config.Metrics), under the const label node
// (the node's ID), so that the routers of several nodes can share one
// registry:
//
//	tenure_router_requests_total{result="served|forwarded|refused"}  counter  requests the Router's HTTP handler served locally, forwarded to their owner, or refused itself (421/503); Stats
//
// The metrics of a Client (ClientConfig.Metrics); register two Clients in
// one registry through prometheus.WrapRegistererWith with a label of your
// choice:
//
//	tenure_client_requests_total{result="ok|retried|failed"}  counter  calls of Client.Do: answered at the first attempt, answered after retries, or failed with an error
//	tenure_client_retries_total                               counter  requests sent again after an attempt of the same call was sent (attempts that found no node to send to are not counted)
//
// The counters read the Stats counters when scraped: they cost nothing on
// the request path.

// The values of the result label.
const (
	resultServed    = "served"
	resultForwarded = "forwarded"
	resultRefused   = "refused"
	resultOK        = "ok"
	resultRetried   = "retried"
	resultFailed    = "failed"
)

// registerRouterMetrics registers r's metrics with reg under node=<id>. It
// returns nil, nil without a registerer, and an error wrapping ErrMetrics
// and the registry's error if they cannot be registered.
func registerRouterMetrics(reg prometheus.Registerer, r *Router) (*metrics.Set, error) {
	if nilness.Is(reg) {
		return nil, nil
	}
	counter := func(result string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "router", Name: "requests_total",
			Help:        "Requests the router's HTTP handler received, by result: served locally, forwarded to the owner, or refused by the router itself (421 or 503).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v.Load()) })
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"node": r.id}, reg)
	set, err := metrics.Register(reg,
		counter(resultServed, &r.served), counter(resultForwarded, &r.forwarded), counter(resultRefused, &r.refused))
	if err != nil {
		return nil, fmt.Errorf("%w: router of node %s: %w", ErrMetrics, r.id, err)
	}
	return set, nil
}

// clientResults counts the outcomes of Client.Do.
type clientResults struct {
	ok, retried, failed atomic.Int64
}

// record counts one call of Do that sent sent attempts and returned err.
func (c *clientResults) record(sent int, err error) {
	switch {
	case err != nil:
		c.failed.Add(1)
	case sent > 1:
		c.retried.Add(1)
	default:
		c.ok.Add(1)
	}
}

// registerClientMetrics registers c's metrics with reg. It returns nil, nil
// without a registerer, and an error wrapping ErrMetrics and the registry's
// error if they cannot be registered.
func registerClientMetrics(reg prometheus.Registerer, c *Client) (*metrics.Set, error) {
	if nilness.Is(reg) {
		return nil, nil
	}
	result := func(result string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "client", Name: "requests_total",
			Help:        "Calls of Client.Do, by result: ok (answered at the first attempt), retried (answered after retries), failed (returned an error).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v.Load()) })
	}
	retries := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: "client", Name: "retries_total",
		Help: "Requests Client.Do sent again after an earlier attempt of the same call was sent.",
	}, func() float64 { return float64(c.retries.Load()) })
	set, err := metrics.Register(reg,
		result(resultOK, &c.results.ok), result(resultRetried, &c.results.retried), result(resultFailed, &c.results.failed), retries)
	if err != nil {
		return nil, fmt.Errorf("%w: client: %w", ErrMetrics, err)
	}
	return set, nil
}
