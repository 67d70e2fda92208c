package grpcroute

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/metrics"
	"github.com/tenure-go/tenure/internal/nilness"
)

// The metrics of a Server (ServerConfig.Metrics), under the const label
// node (the node's ID), so that the servers of several nodes can share one
// registry:
//
//	tenure_grpc_server_calls_total{result="served|refused"}  counter  routed calls run on this node, or refused with a tenure refusal (ServerStats)
//
// The metrics of a Client (ClientConfig.Metrics); register two Clients in
// one registry through prometheus.WrapRegistererWith with a label of your
// choice:
//
//	tenure_grpc_client_calls_total{result="ok|retried|failed"}  counter  routed calls: answered at the first attempt, answered after retries, or failed
//	tenure_grpc_client_retries_total                            counter  attempts sent again after a retryable refusal, an unavailable owner, or an attempt cut off by AttemptTimeout
//
// The counters read the Stats counters when scraped: they cost nothing on
// the call path.

func registerServerMetrics(reg prometheus.Registerer, s *Server) (*metrics.Set, error) {
	if nilness.Is(reg) {
		return nil, nil
	}
	counter := func(result string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "grpc_server", Name: "calls_total",
			Help:        "Routed gRPC calls a node received, by result: served on this node, or refused with a tenure refusal.",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v.Load()) })
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"node": s.id}, reg)
	set, err := metrics.Register(reg, counter("served", &s.served), counter("refused", &s.refused))
	if err != nil {
		return nil, fmt.Errorf("%w: server of node %s: %w", ErrMetrics, s.id, err)
	}
	return set, nil
}

func registerClientMetrics(reg prometheus.Registerer, c *Client) (*metrics.Set, error) {
	if nilness.Is(reg) {
		return nil, nil
	}
	result := func(result string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "grpc_client", Name: "calls_total",
			Help:        "Routed gRPC calls, by result: ok (answered at the first attempt), retried (answered after retries), failed (returned an error).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v.Load()) })
	}
	retries := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: "grpc_client", Name: "retries_total",
		Help: "Attempts of routed gRPC calls sent again after a retryable refusal, an unavailable owner, or an attempt cut off by AttemptTimeout.",
	}, func() float64 { return float64(c.retries.Load()) })
	set, err := metrics.Register(reg, result("ok", &c.ok), result("retried", &c.retried), result("failed", &c.failed), retries)
	if err != nil {
		return nil, fmt.Errorf("%w: client: %w", ErrMetrics, err)
	}
	return set, nil
}
