package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Report is the outcome of a run.
type Report struct {
	// Acked is the number of acknowledged increments; Counted is the sum of
	// the counters in the store. Mismatched counts the keys whose counter
	// differs from its acknowledged increments.
	Acked, Counted int64
	Mismatched     int
	// StaleRejected counts writes the store refused as stale; StaleAccepted
	// counts paused writes of the killed node that the store accepted after
	// its partitions had failed over (it must be 0).
	StaleRejected, StaleAccepted int64
	// Forwarded counts requests served after one hop; MaxHops is the most
	// hops any request took.
	Forwarded int64
	// Events are the fleet changes made during the run.
	Events []Event
}

// OK reports whether the run's check passed.
func (r *Report) OK() bool {
	return r.Mismatched == 0 && r.Acked > 0 && r.Acked == r.Counted && r.StaleAccepted == 0
}

// Event is one change of the fleet during the run and how long the
// partitions took to be served again.
type Event struct {
	What       string
	Partitions int           // partitions that changed owner
	Took       time.Duration // until all of them were claimed by their new owners
}

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
		_ = d.client.Close()
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

// ms rounds a duration for display.
func ms(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// waitSettled waits until every partition is served by the owner the ring
// of the running nodes gives it: the client sees that owner's claim, and the
// owner has raised the store's floor to the claim's epoch and serves it.
// gone, if set, names a node that must own nothing.
func (d *demo) waitSettled(ctx context.Context, gone string) error {
	ring, err := ownership.NewRing(d.fleet.ids(), ownership.RingConfig{Partitions: d.cfg.Partitions, LoadFactor: 1.25})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		wait := d.unsettled(ring, gone)
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("partitions not settled: %w", ctx.Err())
		}
	}
}

// unsettled returns nil if every partition is served by its ring owner, or
// else a channel that is closed when the view that is lagging changes.
func (d *demo) unsettled(ring *ownership.Ring, gone string) <-chan struct{} {
	for p := range d.cfg.Partitions {
		changed := d.client.Changed()
		r := d.client.LookupPartition(p)
		want, _ := ring.Owner(p)
		if r.Epoch == 0 || r.Owner != want || r.Owner == gone {
			return changed
		}
		n := d.fleet.get(want)
		if n == nil {
			return changed
		}
		changed = n.node.Changed()
		if local := n.node.LookupPartition(p); !local.Local || local.Epoch != r.Epoch {
			return changed
		}
	}
	return nil
}

// ownedBy counts the partitions the client sees claimed by id.
func (d *demo) ownedBy(id string) int {
	n := 0
	for p := range d.cfg.Partitions {
		if d.client.LookupPartition(p).Owner == id {
			n++
		}
	}
	return n
}

// runLoad runs the workers and, at a quarter, a half and three quarters of
// the increments, kills a node, adds one and removes one.
func (d *demo) runLoad(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tick <-chan time.Time
	if d.cfg.Rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(d.cfg.Rate))
		defer t.Stop()
		tick = t.C
	}
	eventsDone := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, d.cfg.Workers+1)
	for w := range d.cfg.Workers {
		wg.Go(func() {
			if err := d.worker(ctx, w, tick, eventsDone); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Go(func() { d.progress(ctx) })
	err := d.events(ctx)
	close(eventsDone)
	if err != nil {
		cancel()
	}
	wg.Wait()
	close(errs)
	if d.cfg.Progress != nil {
		fmt.Fprintln(d.cfg.Progress)
	}
	return errors.Join(append([]error{err}, collect(errs)...)...)
}

func collect(ch <-chan error) []error {
	var errs []error
	for err := range ch {
		errs = append(errs, err)
	}
	return errs
}

// worker drives the keys k with k mod Workers == w, one increment at a time,
// round robin, until the target is reached and the events are over.
func (d *demo) worker(ctx context.Context, w int, tick <-chan time.Time, eventsDone <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	for seq := 0; ; seq++ {
		for k := w; k < d.cfg.Keys; k += d.cfg.Workers {
			if d.total.Load() >= int64(d.cfg.Increments) && closed(eventsDone) {
				return nil
			}
			if tick != nil {
				select {
				case <-tick:
				case <-ctx.Done():
					return nil
				}
			}
			key := "key-" + strconv.Itoa(k)
			idem := key + "#" + strconv.Itoa(seq)
			if err := d.increment(ctx, key, idem, rng); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			d.acked[k].Add(1)
			d.total.Add(1)
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// increment sends one increment until it is acknowledged. One in five goes
// first to a random node, as a caller that does not know the fleet would
// send it; the rest go through the Client, straight to the owner. Every
// attempt carries the same idempotency key, so an increment whose
// acknowledgement was lost is applied once however often it is retried.
func (d *demo) increment(ctx context.Context, key, idem string, rng *rand.Rand) error {
	d.sent.Add(1)
	if rng.IntN(5) == 0 {
		if ids := d.fleet.ids(); len(ids) > 0 {
			if n := d.fleet.get(ids[rng.IntN(len(ids))]); n != nil {
				if ok := d.post(ctx, "http://"+n.addr, key, idem, nil); ok {
					return nil
				}
			}
		}
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d.retries.Add(1)
		}
		if d.post(ctx, "", key, idem, d.client) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt >= 100 {
			return fmt.Errorf("increment %s: no acknowledgement after %d attempts", idem, attempt+1)
		}
	}
}

// post sends one increment, directly to base or, if c is set, through c,
// and reports whether it was acknowledged.
func (d *demo) post(ctx context.Context, base, key, idem string, c *router.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/incr/"+key, http.NoBody)
	if err != nil {
		return false
	}
	req.Header.Set(router.HeaderIdempotencyKey, idem)
	var resp *http.Response
	if c != nil {
		resp, err = c.Do(ctx, key, req)
	} else {
		resp, err = d.direct.Do(req)
	}
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// progress writes the progress line until ctx ends.
func (d *demo) progress(ctx context.Context) {
	if d.cfg.Progress == nil {
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(d.cfg.Progress, "\r[%6v] %5d/%d acknowledged, %d retries, %d stale writes rejected, nodes %v   ",
				d.since(), d.total.Load(), d.cfg.Increments, d.retries.Load(), d.fleet.app.staleRejected.Load(), d.fleet.ids())
		}
	}
}

// waitAcked waits until n increments are acknowledged.
func (d *demo) waitAcked(ctx context.Context, n int64) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for d.total.Load() < n {
		select {
		case <-ctx.Done():
			return errStopped
		case <-t.C:
		}
	}
	return nil
}

// line ends the progress line, if any, and prints an event line.
func (d *demo) line(format string, args ...any) {
	if d.cfg.Progress != nil {
		fmt.Fprint(d.cfg.Progress, "\r\033[K")
	}
	d.printf("[%6v] "+format+"\n", append([]any{d.since()}, args...)...)
}

// events makes the fleet changes at their thresholds.
func (d *demo) events(ctx context.Context) error {
	n := int64(d.cfg.Increments)
	ids := d.fleet.ids()
	if err := d.waitAcked(ctx, n/4); err != nil {
		return err
	}
	if err := d.crash(ctx, ids[1]); err != nil {
		return err
	}
	if err := d.waitAcked(ctx, n/2); err != nil {
		return err
	}
	if err := d.join(ctx); err != nil {
		return err
	}
	if err := d.waitAcked(ctx, 3*n/4); err != nil {
		return err
	}
	return d.leave(ctx, ids[2])
}

// crash kills id while some of its requests are paused between their read
// and their write; once its partitions are served again by others, the
// paused requests resume and write with their old tokens.
func (d *demo) crash(ctx context.Context, id string) error {
	p := d.fleet.app.pauseNext(id, d.cfg.Paused)
	for range d.cfg.Paused {
		select {
		case <-p.paused:
		case <-ctx.Done():
			return errStopped
		}
	}
	parts := d.ownedBy(id)
	t0 := time.Now()
	d.fleet.kill(id)
	d.line("kill %s (no handoff, %d requests paused mid-write); its %d partitions wait for its lease to expire", id, d.cfg.Paused, parts)
	if err := d.waitSettled(ctx, id); err != nil {
		return err
	}
	took := time.Since(t0)
	d.rep.Events = append(d.rep.Events, Event{What: "kill " + id + " (crash, failover)", Partitions: parts, Took: took})
	close(p.resume)
	var rejected, accepted int
	for range d.cfg.Paused {
		err := <-p.results
		switch {
		case errors.Is(err, fence.ErrStale):
			rejected++
		case err == nil:
			accepted++
		}
	}
	d.rep.StaleAccepted += int64(accepted)
	d.line("failover done in %v; %s's %d paused writes resumed: %d rejected as stale, %d accepted", ms(took), id, d.cfg.Paused, rejected, accepted)
	return nil
}

// join adds a node and waits for the partitions the ring gives it.
func (d *demo) join(ctx context.Context) error {
	id := d.newID()
	t0 := time.Now()
	if _, err := d.fleet.start(ctx, id); err != nil {
		return err
	}
	if err := d.waitSettled(ctx, ""); err != nil {
		return err
	}
	took := time.Since(t0)
	parts := d.ownedBy(id)
	d.rep.Events = append(d.rep.Events, Event{What: "join " + id, Partitions: parts, Took: took})
	d.line("join %s: %d partitions handed to it in %v", id, parts, ms(took))
	return nil
}

// leave removes id gracefully and waits for its partitions' new owners.
func (d *demo) leave(ctx context.Context, id string) error {
	parts := d.ownedBy(id)
	t0 := time.Now()
	n, err := d.fleet.leave(ctx, id)
	if n != nil {
		defer n.stop("left")
	}
	if err != nil {
		return err
	}
	if err := d.waitSettled(ctx, id); err != nil {
		return err
	}
	took := time.Since(t0)
	d.rep.Events = append(d.rep.Events, Event{What: "leave " + id + " (graceful)", Partitions: parts, Took: took})
	d.line("leave %s: %d partitions handed off in %v", id, parts, ms(took))
	return nil
}

// check reads every counter and compares it with its acknowledged
// increments.
func (d *demo) check(ctx context.Context) error {
	resp, err := d.fleet.store.Get(ctx, "/quickstart/data/counters/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	counted := map[string]int64{}
	for _, kv := range resp.Kvs {
		c, err := decodeCounter(kv.Value)
		if err != nil {
			return err
		}
		counted[string(bytes.TrimPrefix(kv.Key, []byte("/quickstart/data/counters/")))] = c.count
	}
	for k := range d.cfg.Keys {
		key := "key-" + strconv.Itoa(k)
		acked := d.acked[k].Load()
		d.rep.Acked += acked
		d.rep.Counted += counted[key]
		if counted[key] != acked {
			d.rep.Mismatched++
			d.printf("MISMATCH %s: counter %d, acknowledged %d\n", key, counted[key], acked)
		}
	}
	d.rep.StaleRejected = d.fleet.app.staleRejected.Load()
	return nil
}

// report prints the per-node table, the events and the check.
func (d *demo) report() {
	d.printf("\nnodes:\n")
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tstate\tpartitions\tserved\tforwarded\t")
	f := d.fleet
	f.mu.Lock()
	rows := append([]*node(nil), f.gone...)
	for _, id := range f.idsLocked() {
		n := f.nodes[id]
		n.partitions, n.stats = len(n.node.Owned()), n.router.Stats()
		rows = append(rows, n)
	}
	f.mu.Unlock()
	slices.SortFunc(rows, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	var served int64
	for _, n := range rows {
		d.rep.Forwarded += n.stats.Forwarded
		served += n.stats.Served
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t\n", n.id, n.state, n.partitions, n.stats.Served, n.stats.Forwarded)
	}
	_ = tw.Flush()
	d.printf("(partitions: owned at the end, or when the node stopped)\n")

	d.printf("\nownership moves:\n")
	tw = tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	for _, e := range d.rep.Events {
		fmt.Fprintf(tw, "  %s\t%d partitions\tserved again after %v\n", e.What, e.Partitions, ms(e.Took))
	}
	_ = tw.Flush()

	app := f.app
	d.printf("\nrequests: %d increments sent, %d retried attempts, %d served, %d forwarded one hop\n",
		d.sent.Load(), d.retries.Load(), served, d.rep.Forwarded)
	d.printf("store: %d stale writes rejected, %d accepted; retried increments found already applied: %d; writes cut short by the end of a tenure: %d\n",
		d.rep.StaleRejected, d.rep.StaleAccepted, app.duplicates.Load(), app.failed.Load())
	d.printf("check: %d increments acknowledged, counters sum to %d, %d of %d counters differ from their acknowledged increments\n",
		d.rep.Acked, d.rep.Counted, d.rep.Mismatched, d.cfg.Keys)
}
