package ownership

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// gate holds whoever waits on it while it is shut.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // nil: open
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lagClient is a node's etcd client whose watch of the fleet (the claims,
// the resize keys under them, the members, drain marks, placements and
// spec) can lag: its responses are held while claimsWatch is shut, in
// order. Its claim transactions wait while claims is shut. It records, in order, each claim transaction it commits
// ("claim" or, when a claim found the shape stale, "stale") and each log
// line of the node's (see Write).
type lagClient struct {
	txnHook
	layout      keys.Layout
	claimsWatch gate
	claims      gate

	mu     sync.Mutex
	events []string
	more   chan struct{} // closed and replaced on every event
}

func newLagClient(cli *clientv3.Client, cluster string) *lagClient {
	c := &lagClient{txnHook: txnHook{Client: cli}, layout: keys.New(cluster), more: make(chan struct{})}
	c.commit = c.commitTxn
	return c
}

func (c *lagClient) record(ev string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
	close(c.more)
	c.more = make(chan struct{})
}

// Write takes the node's log lines (hclog JSON): each message is an event.
func (c *lagClient) Write(b []byte) (int, error) {
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		if s, ok := m["@message"].(string); ok {
			c.record("log: " + s)
		}
	}
	return len(b), nil
}

// waitEvent waits until cond holds for the events recorded, and returns
// them.
func (c *lagClient) waitEvent(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		evs, more := append([]string(nil), c.events...), c.more
		c.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("waiting for %s; events: %v", what, evs)
		}
	}
}

func (c *lagClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := c.Client.Watch(ctx, key, opts...)
	if key != c.layout.Claims() { // the fleet's watch starts at the claims' prefix
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			if !resp.Created && c.claimsWatch.wait(ctx) != nil {
				return
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// commitTxn commits a transaction of the node's, then: a claim waits while
// claims is shut, and is recorded.
func (c *lagClient) commitTxn(ctx context.Context, then []clientv3.Op, do func() (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	claims := c.claimOps(then)
	if len(claims) == 0 {
		return do()
	}
	c.claims.mu.Lock()
	shut := c.claims.ch != nil
	c.claims.mu.Unlock()
	if shut {
		c.record("claim waiting")
	} else {
		c.record("claim sent")
	}
	if err := c.claims.wait(ctx); err != nil {
		return nil, err
	}
	resp, err := do()
	if err != nil {
		return resp, err
	}
	ev := "claim"
	for _, i := range claims {
		tr := resp.Responses[i].GetResponseTxn()
		if !tr.Succeeded && len(tr.Responses[0].GetResponseRange().GetKvs()) == 0 {
			ev = "stale"
		}
	}
	c.record(ev)
	return resp, err
}

// claimOps returns the indexes of the operations ops that claim a
// partition: nested transactions that put a claim key.
func (c *lagClient) claimOps(ops []clientv3.Op) []int {
	var out []int
	for i, op := range ops {
		if !op.IsTxn() {
			continue
		}
		_, then, _ := op.Txn()
		for _, th := range then {
			if _, ok := c.layout.ClaimPartition(string(th.KeyBytes())); ok && th.IsPut() {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// TestClaimWaitsForTheClaimsWatch: a node whose watch of the fleet lags
// during a resize (the resize is aborted, and its view, a consistent cut,
// stays before the abort) claims a target partition under the shape it
// knows; etcd refuses the claim (its shape is stale), and the node claims nothing more until its view has reached
// that revision or a backoff has passed (then it logs why it claims
// again); no claim of its succeeds meanwhile. Once its watch catches up, the
// abort completes and every partition is served.
func TestClaimWaitsForTheClaimsWatch(t *testing.T) {
	c := cluster.New(t, 1)
	const P, name = 4, "shapewait"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := c.NewClient(t)
	lag := newLagClient(c.NewClient(t), name)
	a := join(t, cli, testConfig(t, name, "a", P))
	bcfg := testConfig(t, name, "b", P)
	bcfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: lag, JSONFormat: true})
	b := join(t, lag, bcfg)
	waitStable(t, 30*time.Second, a, b)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	lag.claims.shut()
	start := len(lag.waitEvent(t, "nothing", func([]string) bool { return true }))
	rctx, stopResize := context.WithCancel(ctx)
	resized := make(chan error, 1)
	go func() {
		_, err := op.Resize(rctx, 8, fleet.ResizeOptions{Actor: "t", Reason: "lagging watch"})
		resized <- err
	}()
	// b claims a target of a done group; the claim waits at the gate.
	lag.waitEvent(t, "a claim at the gate", func(evs []string) bool { return slices.Contains(evs[start:], "claim waiting") })
	lag.claimsWatch.shut()
	stopResize() // its driver stops, as a crash would; the abort drives the resize from here
	require.ErrorIs(t, <-resized, context.Canceled)
	spec, err := cli.Get(ctx, keys.New(name).Spec())
	require.NoError(t, err)
	aborted := make(chan error, 1)
	go func() {
		_, err := op.Resize(ctx, 0, fleet.ResizeOptions{Actor: "t", Reason: "lagging watch", Abort: true})
		aborted <- err
	}()
	specWrittenAfter(ctx, t, cli, name, spec.Kvs[0].ModRevision)
	lag.claims.open()
	evs := lag.waitEvent(t, "a stale claim", func(evs []string) bool { return slices.Index(evs[start:], "stale") >= 0 })
	from := start + slices.Index(evs[start:], "stale")
	// Claims sent before the gate opened may find the shape stale after
	// this one; a claim sent after it must wait for the watch.
	const again = "log: resize: the fleet's shape changed at a revision the watch has not brought; claiming again"
	sentOrLogged := func(ev string) bool { return ev == "claim sent" || ev == "claim waiting" || ev == again }
	evs = lag.waitEvent(t, "the wait's end", func(evs []string) bool { return slices.ContainsFunc(evs[from+1:], sentOrLogged) })
	next := evs[from+1+slices.IndexFunc(evs[from+1:], sentOrLogged)]
	require.Equal(t, again, next, "after a claim found its shape stale, b claims again only once the wait for its watch ends: %v", evs[start:])

	held := lag.waitEvent(t, "", func([]string) bool { return true })
	require.NotContains(t, held[start:], "claim", "no claim of b's succeeds while its claims watch lags")
	lag.claimsWatch.open()
	select {
	case err := <-aborted:
		require.NoError(t, err, "the abort: %v", lag.waitEvent(t, "", func([]string) bool { return true })[start:])
	case <-ctx.Done():
		t.Fatal("the abort did not complete")
	}
	t.Logf("the claim found its shape stale at event %d: %v", from, evs[from:])
	waitStable(t, 30*time.Second, a, b)
}

// specWrittenAfter waits until the spec of cluster is written after rev.
func specWrittenAfter(ctx context.Context, t *testing.T, cli *clientv3.Client, cluster string, rev int64) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range cli.Watch(wctx, keys.New(cluster).Spec(), clientv3.WithRev(rev+1)) {
		if len(resp.Events) > 0 {
			return
		}
	}
	t.Fatal("the spec was not written")
}
