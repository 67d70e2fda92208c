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

	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// demo is one run: its etcd cluster, fleet, client and tallies.
type demo struct {
	cfg   Config
	out   io.Writer
	start time.Time

	etcd   *cluster.Cluster
	clis   []*clientv3.Client
	fleet  *fleet
	client *router.Client
	direct *http.Client

	acked   []atomic.Int64 // per key
	total   atomic.Int64
	sent    atomic.Int64
	retries atomic.Int64
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

	storeCli, err := d.newClient()
	if err != nil {
		return err
	}
	store, err := newStore(storeCli)
	if err != nil {
		return err
	}
	d.fleet = &fleet{etcd: d.etcd, store: storeCli, cfg: d.cfg, nodes: map[string]*node{},
		app: &counters{store: store, timeout: 5 * time.Second, pauses: map[string]*pause{}}}
	t0 := time.Now()
	for range d.cfg.Nodes {
		if _, err := d.fleet.start(ctx, d.newID()); err != nil {
			return err
		}
	}
	clientCli, err := d.newClient()
	if err != nil {
		return err
	}
	if d.client, err = router.NewClient(ctx, clientCli, router.ClientConfig{Cluster: clusterName, Partitions: d.cfg.Partitions}); err != nil {
		return err
	}
	if err := d.waitSettled(ctx, ""); err != nil {
		return err
	}
	d.printf("[%6v] fleet: %v joined; all %d partitions claimed in %v\n", d.since(), d.fleet.ids(), d.cfg.Partitions, ms(time.Since(t0)))
	d.direct = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	d.acked = make([]atomic.Int64, d.cfg.Keys)
	return nil
}

func (d *demo) newClient() (*clientv3.Client, error) {
	cli, err := d.etcd.Client()
	if err == nil {
		d.clis = append(d.clis, cli)
	}
	return cli, err
}

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
	if d.direct != nil {
		d.direct.CloseIdleConnections()
	}
	for _, c := range d.clis {
		_ = c.Close()
	}
	if d.etcd != nil {
		_ = d.etcd.Close()
	}
}
