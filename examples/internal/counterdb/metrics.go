package counterdb

import (
	"database/sql"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tenure-go/tenure/examples/internal/app"
)

// Metrics are the store's Prometheus metrics (counter_*), in a registry of
// its own (never the global one): what a process's /metrics serves, with
// the library's tenure_* metrics registered in the same registry.
type Metrics struct {
	// Registry holds the metrics; a process registers the library's in it
	// too.
	Registry *prometheus.Registry

	applied        prometheus.Counter // increments committed
	duplicates     prometheus.Counter // retried increments answered from the stored result
	stale          prometheus.Counter // increments refused as stale by the database
	commitFailures prometheus.Counter // transactions that failed otherwise
	batches        prometheus.Counter // transactions committed
	batchSize      prometheus.Histogram
	commitSeconds  prometheus.Histogram
	owned          prometheus.Gauge // partitions served
	keys           prometheus.Gauge // counters held in memory
	loads          *prometheus.CounterVec
	rowsLoaded     *prometheus.CounterVec
	preparedHits   prometheus.Counter // first reads of a counter in a tenure, from prepared state
	coldReads      prometheus.Counter // first reads of a counter in a tenure, from a load after the claim
}

// NewMetrics returns the store's metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "counter_increments_applied_total",
			Help: "Increments this process committed.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "counter_increments_duplicate_total",
			Help: "Increments whose idempotency key had been applied already: answered with the stored result, not applied again.",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "counter_increments_stale_total",
			Help: "Increments the database refused because a newer owner had fenced their partition (answered with the retryable stale refusal).",
		}),
		commitFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "counter_commit_failures_total",
			Help: "Increments whose transaction failed for another reason than a stale token (their partitions are loaded again).",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "counter_commits_total",
			Help: "Transactions committed.",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "counter_commit_batch_size",
			Help:    "Increments per transaction (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "counter_commit_seconds",
			Help:    "Time from an increment's submission to its commit's answer (with group commit, the wait for its batch included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "counter_partitions_owned",
			Help: "Partitions this process serves.",
		}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "counter_keys_in_memory",
			Help: "Counters held in memory for the partitions this process serves.",
		}),
	}
	m.loads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "counter_sql_loads_total",
		Help: "Reads of a partition's counters from the database, by kind: prepare (a snapshot read while the previous owner served), catchup (after the claim: the rows changed since the snapshot), full (after the claim: every row of the partition, a cold start).",
	}, []string{"kind"})
	m.rowsLoaded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "counter_sql_rows_loaded_total",
		Help: "Counters read from the database, by the kind of read (see counter_sql_loads_total).",
	}, []string{"kind"})
	m.preparedHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "counter_prepared_hits_total",
		Help: "Reads of a counter that has a value (an increment or a GET), the first of that counter in its partition's tenure, served from state prepared before the claim (a snapshot caught up after it).",
	})
	m.coldReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "counter_cold_reads_total",
		Help: "Reads of a counter that has a value, the first of that counter in its partition's tenure, served from state loaded cold after the claim (a full load). The hit rate of the warm handoff is counter_prepared_hits_total over the sum of both.",
	})
	for _, k := range []string{"prepare", "catchup", "full"} {
		m.loads.WithLabelValues(k)
		m.rowsLoaded.WithLabelValues(k)
	}
	m.Registry = app.NewRegistry(m.applied, m.duplicates, m.stale, m.commitFailures, m.batches, m.batchSize,
		m.commitSeconds, m.owned, m.keys, m.loads, m.rowsLoaded, m.preparedHits, m.coldReads)
	return m
}

// PoolName is the db_name label of the connection pool's metrics
// (WatchPool).
const PoolName = "counter"

// WatchPool adds the connection pool of db to m's registry: the
// go_sql_* metrics, labelled db_name="counter" (PoolName), among them
// the connections in use and idle, and the number of times, and the time
// in all, that a caller waited for one (go_sql_wait_count_total,
// go_sql_wait_duration_seconds_total). A rising wait count means that
// the loads of acquired partitions or the commits queue for connections,
// and a fence raise on a move's critical path may queue behind them. A
// registry watches one pool.
func (m *Metrics) WatchPool(db *sql.DB) error {
	if err := m.Registry.Register(collectors.NewDBStatsCollector(db, PoolName)); err != nil {
		return fmt.Errorf("watch the connection pool: %w", err)
	}
	return nil
}
