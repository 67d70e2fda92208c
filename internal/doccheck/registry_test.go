package doccheck

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// A recorder is a Registerer that remembers the metric names and label
// names of every descriptor registered through it, so that a metric
// counts as registered before it has a sample (a vector whose labels
// no event has set yet).
type recorder struct {
	reg prometheus.Registerer

	mu     sync.Mutex
	labels map[string][]string // metric name -> its label names, const and variable
	errs   []error
}

func newRecorder(reg prometheus.Registerer) *recorder {
	return &recorder{reg: reg, labels: map[string][]string{}}
}

// descRE parses prometheus.Desc.String(): the name, the const label pairs
// and the variable label names.
var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: ".*", (?:unit: "[^"]*", )?constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// Register implements prometheus.Registerer.
func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			r.errs = append(r.errs, fmt.Errorf("cannot read descriptor %s", d))
			continue
		}
		var labels []string
		for _, pair := range strings.Split(m[2], ",") {
			if name, _, ok := strings.Cut(pair, "="); ok {
				labels = append(labels, name)
			}
		}
		for _, v := range strings.Split(m[3], ",") {
			if v = strings.TrimSuffix(strings.TrimPrefix(v, "c("), ")"); v != "" {
				labels = append(labels, v)
			}
		}
		labels = append(labels, r.labels[m[1]]...)
		slices.Sort(labels)
		r.labels[m[1]] = slices.Compact(labels)
	}
	return nil
}

// MustRegister implements prometheus.Registerer; a failure is recorded,
// for the test to report.
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// registered returns the label names of every metric registered, by name.
func (r *recorder) registered(t *testing.T) map[string][]string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		t.Error(err)
	}
	out := make(map[string][]string, len(r.labels))
	for name, labels := range r.labels {
		out[name] = slices.Clone(labels)
	}
	return out
}

// runComponents starts, on a real 1-member embedded etcd and with reg as
// every Config.Metrics, each component that registers metrics: two Nodes
// (one joins after the Balancer's first plan, so that its second plan
// counts the partitions the join moved) fenced by an etcdfence.Store and a
// sqlfence.Fencer on SQLite, a Router, a router.Client, a Session and an
// Election that wins a term, an httpfence.Handler, a Balancer that plans
// and applies a pass under that term, and a grpcroute Server and Client.
// It calls gather while they all run, before they stop and unregister
// their metrics.
func runComponents(t *testing.T, reg prometheus.Registerer, gather func()) {
	const fleetName = "docs"
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: fleetName, Metrics: reg})
	check("etcdfence", err)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "fences.db")+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	check("sqlite", err)
	defer db.Close()
	fences, err := sqlfence.New(sqlfence.Config{Dialect: sqlfence.SQLite, Metrics: reg})
	check("sqlfence", err)
	check("fences table", fences.CreateTable(ctx, db))

	cfg := nodeConfig(fleetName, "n1", 8, nil)
	cfg.Metrics = reg
	cfg.Fencers = []fence.Fencer{store, sqlfence.Fencer{DB: db, Fences: fences}}
	n1 := join(t, cli, cfg)
	waitStable(t, n1)

	rt, err := router.New(n1, router.Config{Metrics: reg})
	check("router", err)
	defer rt.Close()
	rc, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: fleetName, Metrics: reg})
	check("router client", err)
	defer rc.Close()

	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second}) // the node's sessions registered the session metrics
	check("session", err)
	defer sess.Close(context.Background())
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: fleetName, Name: "balancer", ID: "n1", Metrics: reg})
	check("election", err)
	defer e.Close(context.Background())
	term, err := e.Campaign(ctx)
	check("campaign", err)

	pub, _, err := ed25519.GenerateKey(nil)
	check("key", err)
	verifier, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": pub})
	check("verifier", err)
	_, err = httpfence.New(http.NotFoundHandler(), httpfence.Config{Verifier: verifier, Fencer: store, Metrics: reg})
	check("httpfence", err)

	b, err := balance.NewBalancer(cli, balance.Config{Cluster: fleetName, Metrics: reg})
	check("balancer", err)
	_, err = b.Plan(ctx)
	check("plan", err)
	cfg2 := nodeConfig(fleetName, "n2", 8, nil)
	cfg2.Metrics = reg
	cfg2.Fencers = cfg.Fencers
	n2 := join(t, cli, cfg2)
	waitStable(t, n1, n2)
	pl, err := b.Plan(ctx)
	check("plan", err)
	check("apply", b.Apply(ctx, term, pl))

	gs, err := grpcroute.NewServer(n1, grpcroute.ServerConfig{Metrics: reg})
	check("grpcroute server", err)
	defer gs.Close()
	gc, err := grpcroute.NewClient(cli, grpcroute.ClientConfig{Metrics: reg})
	check("grpcroute client", err)
	defer gc.Close()

	gather()
	check("resign", term.Resign(ctx))
}
