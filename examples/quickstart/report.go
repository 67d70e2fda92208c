package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Report is the outcome of a run.
type Report struct {
	// Acked is the number of acknowledged increments; Counted is the sum of
	// the counters in the store. Mismatched counts the keys whose counter
	// differs from its acknowledged increments.
	Acked, Counted int64
	Mismatched     int
	// Keys is the number of counters checked.
	Keys int
	// StaleRejected counts writes the store refused as stale; StaleAccepted
	// counts paused writes of the killed node that the store accepted after
	// its partitions had failed over (it must be 0).
	StaleRejected, StaleAccepted int64
	// Sent counts the increments sent and Retried the extra attempts the
	// load and its Client made for them; Served and Forwarded count the
	// requests the nodes served locally and those they forwarded one hop to
	// the owner.
	Sent, Retried, Served, Forwarded int64
	// Duplicates counts retried increments the store found already applied
	// (by idempotency key). CutShort counts increments cut short by the end
	// of their tenure, which were answered, as the stale writes were, with
	// the retryable refusal that the Client follows to the next owner;
	// Failed counts those that failed otherwise (answered 500).
	Duplicates, CutShort, Failed int64
	// Nodes are the nodes of the run, by ID, as they were at the end or
	// when they stopped.
	Nodes []NodeReport
	// Events are the fleet changes made during the run.
	Events []Event
}

// NodeReport is one node's share of a run.
type NodeReport struct {
	ID    string
	State string // "up", "killed" or "left"
	// Partitions are the partitions it owned at the end, or when it
	// stopped; Served and Forwarded count its HTTP requests.
	Partitions        int
	Served, Forwarded int64
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

// check reads every counter and compares it with its acknowledged
// increments.
func (d *demo) check(ctx context.Context) error {
	prefix := dataPrefix + counterKey("")
	resp, err := d.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	counted := map[string]int64{}
	for _, kv := range resp.Kvs {
		c, err := decodeCounter(kv.Value)
		if err != nil {
			return err
		}
		counted[string(bytes.TrimPrefix(kv.Key, []byte(prefix)))] = c.count
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
	return nil
}

// gather completes the report with the nodes' counters and the load's
// tallies.
func (d *demo) gather() {
	f := d.fleet
	f.mu.Lock()
	rows := append([]*node(nil), f.gone...)
	for _, n := range f.nodes {
		n.partitions, n.stats = len(n.node.Owned()), n.router.Stats()
		rows = append(rows, n)
	}
	f.mu.Unlock()
	slices.SortFunc(rows, func(a, b *node) int { return cmp.Compare(a.id, b.id) })
	r := &d.rep
	r.Nodes = r.Nodes[:0]
	r.Served, r.Forwarded = 0, 0
	for _, n := range rows {
		r.Nodes = append(r.Nodes, NodeReport{ID: n.id, State: n.state, Partitions: n.partitions, Served: n.stats.Served, Forwarded: n.stats.Forwarded})
		r.Served += n.stats.Served
		r.Forwarded += n.stats.Forwarded
	}
	r.Keys = d.cfg.Keys
	r.Sent, r.Retried = d.sent.Load(), d.retried()
	r.StaleRejected = f.app.staleRejected.Load()
	r.Duplicates, r.CutShort, r.Failed = f.app.duplicates.Load(), f.app.cutShort.Load(), f.app.failed.Load()
}

// Print writes the per-node table, the events and the check to w. It does
// not change the report.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nnodes:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tstate\tpartitions\tserved\tforwarded\t")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t\n", n.ID, n.State, n.Partitions, n.Served, n.Forwarded)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "(partitions: owned at the end, or when the node stopped)\n")

	fmt.Fprintf(w, "\nownership moves:\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range r.Events {
		fmt.Fprintf(tw, "  %s\t%d partitions\tserved again after %v\n", e.What, e.Partitions, ms(e.Took))
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nrequests: %d increments sent, %d retried attempts, %d served, %d forwarded one hop\n",
		r.Sent, r.Retried, r.Served, r.Forwarded)
	fmt.Fprintf(w, "store: %d stale writes rejected, %d accepted; retried increments found already applied: %d\n",
		r.StaleRejected, r.StaleAccepted, r.Duplicates)
	fmt.Fprintf(w, "handlers: %d increments cut short by the end of a tenure (answered as a handoff, retried at the next owner), %d failed otherwise\n",
		r.CutShort, r.Failed)
	fmt.Fprintf(w, "check: %d increments acknowledged, counters sum to %d, %d of %d counters differ from their acknowledged increments\n",
		r.Acked, r.Counted, r.Mismatched, r.Keys)
}

// ms rounds a duration for display.
func ms(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
