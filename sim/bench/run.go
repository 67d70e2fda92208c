package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/cluster"
)

// env holds what the comparisons share: the embedded etcd clusters, started
// on first use, and the Redis server.
type env struct {
	cfg      Config
	clusters map[int]*cluster.Cluster
	seq      int // for unique names
}

// etcd returns the running cluster of the given size (1 or 3), starting it
// on first use.
func (e *env) etcd(ctx context.Context, members int) (*cluster.Cluster, error) {
	if c := e.clusters[members]; c != nil {
		return c, nil
	}
	cfg := cluster.DefaultConfig()
	cfg.Members = members
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: start %d-member etcd: %w", members, err)
	}
	e.clusters[members] = c
	return c, nil
}

// client returns a new client of the cluster of the given size.
func (e *env) client(ctx context.Context, members int) (*clientv3.Client, error) {
	c, err := e.etcd(ctx, members)
	if err != nil {
		return nil, err
	}
	return c.Client()
}

// name returns a unique name with the given stem, for clusters and
// prefixes.
func (e *env) name(stem string) string {
	e.seq++
	return fmt.Sprintf("%s-%d", stem, e.seq)
}

func (e *env) close() {
	for _, c := range e.clusters {
		_ = c.Close()
	}
}

// Run runs the comparisons cfg selects, writes the markdown report to w
// (if not nil) and returns the report.
func Run(ctx context.Context, cfg Config, w io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Only = append([]string(nil), cfg.Only...)
	e := &env{cfg: cfg, clusters: map[int]*cluster.Cluster{}}
	defer e.close()
	rep := &Report{Start: time.Now().UTC(), LoadStart: loadAvg(), CPUs: runtime.NumCPU(), Rounds: cfg.rounds(), Quick: cfg.Quick}
	steps := []struct {
		key string
		run func(context.Context, *env) ([]Section, error)
	}{
		{"lookup", runLookup},
		{"put", runPut},
		{"group", runGroup},
		{"routed", runRouted},
		{"failover", runFailover},
		{"rolling", runRolling},
		{"ring", runRing},
	}
	for _, s := range steps {
		if !cfg.runs(s.key) {
			continue
		}
		cfg.progress("%s ...", s.key)
		start := time.Now()
		secs, err := s.run(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("bench %s: %w", s.key, err)
		}
		cfg.progress("%s done in %v", s.key, time.Since(start).Round(time.Millisecond))
		rep.Sections = append(rep.Sections, secs...)
	}
	rep.Wall = time.Since(rep.Start)
	rep.LoadEnd = loadAvg()
	if w != nil {
		if err := WriteMarkdown(w, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// loadAvg returns the 1-minute load average, or -1 where it cannot be read.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// errSkip marks a comparison skipped for a missing dependency.
var errSkip = errors.New("not available")
