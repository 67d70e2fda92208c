package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// childEnv, when set, makes this test binary run one node in its own
// process (runChild) instead of the tests, so that a test can stop the
// whole process (SIGSTOP) as a pause would. The child reads its settings
// from the environment variables below.
const (
	childEnv           = "TENURE_OWNERSHIP_CHILD" // the node ID
	childEndpointsEnv  = "TENURE_OWNERSHIP_CHILD_ENDPOINTS"
	childClusterEnv    = "TENURE_OWNERSHIP_CHILD_CLUSTER"
	childPartitionsEnv = "TENURE_OWNERSHIP_CHILD_PARTITIONS"
)

// runChild joins one node with a TTL of 2s, advertising the loopback port
// it serves on, logs its events as JSON lines at Info on standard error,
// and serves its health (/healthz/livez, /healthz/readyz), its metrics in
// Prometheus's text format (/metrics) and flattened into JSON
// (/metrics.json, see flatMetrics), and work (/work?key=K: holds K's
// partition for a millisecond; 200 if it was admitted, 409 if not); it
// writes "addr <host:port>" on standard output once it listens. It leaves
// the fleet when its standard input ends or on SIGTERM.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: os.Stderr, JSONFormat: true})
	partitions, err := strconv.Atoi(os.Getenv(childPartitionsEnv))
	if err != nil {
		log.Error("partitions", "error", err)
		return 2
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv(childEndpointsEnv), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // the etcd client's own logs, silenced
	})
	if err != nil {
		log.Error("etcd client", "error", err)
		return 2
	}
	defer cli.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Error("listen", "error", err)
		return 1
	}
	defer ln.Close()
	reg := prometheus.NewPedanticRegistry()
	cfg := DefaultConfig()
	cfg.Cluster = os.Getenv(childClusterEnv)
	cfg.NodeID = os.Getenv(childEnv)
	cfg.Addr = ln.Addr().String()
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.Logger, cfg.Metrics = log, reg
	jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	n, err := Join(jctx, cli, cfg)
	cancel()
	if err != nil {
		log.Error("join", "error", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz/", n.HealthHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		held, err := n.Hold(r.URL.Query().Get("key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		defer held.Release()
		time.Sleep(time.Millisecond) // the work, in flight while a handoff drains
	})
	mux.HandleFunc("/metrics.json", func(w http.ResponseWriter, _ *http.Request) {
		m, err := flatMetrics(reg)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(m)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("addr %s\n", ln.Addr())
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case <-ctx.Done():
	case <-stdin:
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(cctx)
	if err := n.Close(cctx); err != nil {
		log.Error("close", "error", err)
		return 1
	}
	return 0
}

// flatMetrics gathers g into name{label="value",...} -> value, labels
// sorted; a histogram gives name_count and name_sum.
func flatMetrics(g prometheus.Gatherer) (map[string]float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Histogram != nil:
				out[mf.GetName()+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+ls] = m.GetHistogram().GetSampleSum()
			case m.Counter != nil:
				out[mf.GetName()+ls] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[mf.GetName()+ls] = m.GetGauge().GetValue()
			}
		}
	}
	return out, nil
}
