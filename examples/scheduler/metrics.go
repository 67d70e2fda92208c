package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/examples/internal/app"
)

// metrics are the scheduler's Prometheus metrics, in a registry of its own
// (never the global one): what /metrics serves.
type metrics struct {
	reg *prometheus.Registry

	runs      *prometheus.CounterVec // periods closed by this process, by tenant
	stale     prometheus.Counter     // runs the database refused as stale
	failures  prometheus.Counter     // runs that failed otherwise
	terms     prometheus.Counter     // terms won
	isLeader  prometheus.Gauge
	lastClose *prometheus.GaugeVec // end of the last period this process closed, by tenant
}

func newMetrics() *metrics {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_runs_total",
			Help: "Periods closed by this process (committed fenced writes), by tenant.",
		}, []string{"tenant"}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_stale_runs_rejected_total",
			Help: "Runs of this process that the database refused because a newer leader had fenced the job.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_run_failures_total",
			Help: "Runs that failed for another reason (database errors, a period found closed already); they are retried.",
		}),
		terms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_terms_total",
			Help: "Terms of leadership this process has won.",
		}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_is_leader",
			Help: "1 while this process holds the job's leadership (its fencers advanced), else 0.",
		}),
		lastClose: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_last_closed_period_end_seconds",
			Help: "End (Unix seconds) of the last period this process closed, by tenant: alert on time() minus its max across the fleet.",
		}, []string{"tenant"}),
	}
	m.reg = app.NewRegistry(m.runs, m.stale, m.failures, m.terms, m.isLeader, m.lastClose)
	return m
}
