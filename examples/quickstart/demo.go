package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// demo is one run: its etcd cluster, fleet, client and tallies.
type demo struct {
	cfg   Config
	out   io.Writer
	start time.Time

	etcd   *cluster.Cluster
	cli    *clientv3.Client // the store's and the Client's: outside the fleet
	fleet  *fleet
	client *router.Client
	http   *http.Client // the Client's, and that of requests sent to a node directly

	acked   []atomic.Int64 // per key
	total   atomic.Int64
	sent    atomic.Int64
	retries atomic.Int64 // increments sent to a node directly, sent again through the Client
	rep     Report
	nextID  int
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *demo) since() time.Duration { return time.Since(d.start).Round(10 * time.Millisecond) }

// line ends the progress line, if any, and prints an event line.
func (d *demo) line(format string, args ...any) {
	if d.cfg.Progress != nil {
		fmt.Fprint(d.cfg.Progress, "\r\033[K")
	}
	d.printf("[%6v] "+format+"\n", append([]any{d.since()}, args...)...)
}

func (d *demo) setUp(ctx context.Context) error {
	d.printf("tenure quickstart: %d nodes, %d partitions, %d counters, %d workers, lease TTL %v\n",
		d.cfg.Nodes, d.cfg.Partitions, d.cfg.Keys, d.cfg.Workers, d.cfg.TTL)
	ecfg := cluster.DefaultConfig()
	ecfg.Members = 3
	var err error
	if d.etcd, err = cluster.Start(ctx, ecfg); err != nil {
		return err
	}
	leader, err := d.etcd.WaitLeader(ctx)
	if err != nil {
		return err
	}
	d.printf("[%6v] etcd: 3 members on loopback, leader m%d\n", d.since(), leader)

	if d.cli, err = d.etcd.Client(); err != nil {
		return err
	}
	store, err := newStore(d.cli)
	if err != nil {
		return err
	}
	d.fleet = &fleet{etcd: d.etcd, ttl: d.cfg.TTL, ring: ring.DefaultConfig(), nodes: map[string]*node{},
		app: &counters{store: store, timeout: 5 * time.Second}}
	d.fleet.ring.Partitions = d.cfg.Partitions
	t0 := time.Now()
	for range d.cfg.Nodes {
		if _, err := d.fleet.start(ctx, d.newID()); err != nil {
			return err
		}
	}
	d.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	// Its retries outlast a failover (a TTL) many times over.
	if d.client, err = router.NewClient(ctx, d.cli, router.ClientConfig{Cluster: clusterName, Partitions: d.cfg.Partitions, HTTPClient: d.http,
		SessionTTL: d.cfg.TTL, Backoff: router.Backoff{MaxAttempts: 30}}); err != nil {
		return err
	}
	if err := d.waitSettled(ctx); err != nil {
		return err
	}
	d.printf("[%6v] fleet: %v joined; all %d partitions claimed in %v\n", d.since(), d.fleet.ids(), d.cfg.Partitions, ms(time.Since(t0)))
	d.acked = make([]atomic.Int64, d.cfg.Keys)
	return nil
}

// retried counts the increments' attempts after their first.
func (d *demo) retried() int64 { return d.retries.Load() + d.client.Stats().Retries }

func (d *demo) newID() string {
	d.nextID++
	return "node-" + strconv.Itoa(d.nextID)
}

func (d *demo) close() {
	if d.fleet != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = d.fleet.closeAll(ctx)
		cancel()
	}
	if d.client != nil {
		d.client.Close()
	}
	if d.http != nil {
		d.http.CloseIdleConnections()
	}
	if d.cli != nil {
		_ = d.cli.Close()
	}
	if d.etcd != nil {
		_ = d.etcd.Close()
	}
}
