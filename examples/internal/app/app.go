// Package app is the scaffolding the example commands share: the common
// flags (node ID, fleet name, etcd or an embedded etcd, logging), main's
// parsing of the command line, logger and signal handling, the metrics
// registry and its endpoint, and a retry loop for what may not be up yet
// when a process starts. The database a --db flag names is package sqldb's.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/examples/internal/etcdhost"
)

// Flags are the flags every example command takes.
type Flags struct {
	ID             string
	Cluster        string
	Etcd           []string
	EmbeddedEtcd   string
	EmbeddedListen string
	EmbeddedPeer   string
	LogLevel       string
	LogJSON        bool

	etcd string // --etcd before it is split
}

// Register defines the flags in fs for the command name, with the usage of
// --id and --cluster, which differ by command.
func (f *Flags) Register(fs *flag.FlagSet, name, idUsage, clusterUsage string) {
	fs.StringVar(&f.ID, "id", defaultID(name), idUsage)
	fs.StringVar(&f.Cluster, "cluster", name, clusterUsage)
	fs.StringVar(&f.etcd, "etcd", "http://127.0.0.1:2379", "comma-separated etcd endpoints (ignored with --embedded-etcd)")
	fs.StringVar(&f.EmbeddedEtcd, "embedded-etcd", "", "serve a single-member etcd with its data in `DIR`, for the other copies too, and use it")
	fs.StringVar(&f.EmbeddedListen, "embedded-etcd-listen", "127.0.0.1:2379", "client address of the embedded etcd")
	fs.StringVar(&f.EmbeddedPeer, "embedded-etcd-peer", "127.0.0.1:2380", "peer address of the embedded etcd")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&f.LogJSON, "log-json", false, "log JSON lines instead of text")
}

// Parse parses args into fs, refuses arguments left over, and checks the
// common flags.
func (f *Flags) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.Etcd = SplitList(f.etcd)
	switch {
	case len(f.Etcd) == 0 && f.EmbeddedEtcd == "":
		return errors.New("--etcd or --embedded-etcd is needed")
	case hclog.LevelFromString(f.LogLevel) == hclog.NoLevel:
		return fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", f.LogLevel)
	}
	return nil
}

func defaultID(name string) string {
	host, err := os.Hostname()
	if err != nil {
		host = name
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Main is a command's main: it parses the command line (ParseArgs), logs
// to stderr as the flags say, and calls run with a context that SIGTERM or
// SIGINT ends (SignalContext); it exits 1 if run fails.
func Main[C any](name string, parse func([]string) (C, error), flags func(C) Flags,
	run func(context.Context, C, hclog.Logger) error) {
	cfg := ParseArgs(name, parse)
	f := flags(cfg)
	log := hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(f.LogLevel),
		JSONFormat: f.LogJSON,
		Output:     os.Stderr,
	}).With("node", f.ID)
	ctx, stop := SignalContext()
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("exiting", "error", err)
		stop()
		os.Exit(1)
	}
	log.Info("stopped")
}

// ParseArgs parses the command line of the command name with parse: it
// exits 0 after -help, and 2 with the error on stderr for a command line
// parse refuses.
func ParseArgs[C any](name string, parse func([]string) (C, error)) C {
	cfg, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	return cfg
}

// SignalContext returns a context that SIGTERM or SIGINT ends, and the
// function that stops watching for them.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

// Endpoints returns the etcd endpoints the flags name. With --embedded-etcd it
// first serves that etcd for name, and stop ends it (call it last: the
// others may still be leaving through it); otherwise stop does nothing.
func (f Flags) Endpoints(ctx context.Context, name string, log hclog.Logger) (endpoints []string, stop func(), err error) {
	if f.EmbeddedEtcd == "" {
		return f.Etcd, func() {}, nil
	}
	e, err := etcdhost.Start(ctx, name, f.EmbeddedEtcd, f.EmbeddedListen, f.EmbeddedPeer)
	if err != nil {
		return nil, nil, err
	}
	endpoints = []string{"http://" + f.EmbeddedListen}
	log.Info("serving embedded etcd", "endpoint", endpoints[0], "dir", f.EmbeddedEtcd)
	return endpoints, e.Close, nil
}

// NewClient returns an etcd client for endpoints; it connects lazily.
func NewClient(endpoints []string) (*clientv3.Client, error) { return etcdhost.NewClient(endpoints) }

// NewRegistry returns a command's own metrics registry (never the global
// one), with the Go runtime's and the process's collectors and cs.
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))...)
	return reg
}

// Handle registers the endpoints every command serves on mux: /metrics
// from reg, and /healthz, 200 while the process runs.
func Handle(mux *http.ServeMux, reg *prometheus.Registry) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
}

// Permanent marks an error that Retry cannot fix.
type Permanent struct{ Err error }

func (p Permanent) Error() string { return p.Err.Error() }
func (p Permanent) Unwrap() error { return p.Err }

// Retry calls fn until it succeeds, returns a Permanent error, or limit (or
// ctx) ends, with a growing delay in between: copies that start together
// race for SQLite's file lock, and etcd may not be up yet.
func Retry(ctx context.Context, limit time.Duration, log hclog.Logger, what string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		err := fn(ctx)
		var perm Permanent
		switch {
		case err == nil:
			return nil
		case errors.As(err, &perm):
			return fmt.Errorf("%s: %w", what, perm.Err)
		}
		log.Debug(what+"; retrying", "error", err, "in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%s: %w", what, err)
		case <-timer.C:
		}
		delay = min(2*delay, time.Second)
	}
}
