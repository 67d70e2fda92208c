package ownership

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// testConfig returns a fast configuration for tests: TTL 2s (etcd's
// minimum), a small ring, quiet logs unless -v.
func testConfig(t testing.TB, cluster, id string, partitions int) Config {
	cfg := DefaultConfig()
	cfg.Cluster = cluster
	cfg.NodeID = id
	cfg.Addr = id + ".test:7000"
	cfg.Ring.Partitions = partitions
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	if testing.Verbose() {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	}
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// join joins a node and closes it when the test ends.
func join(t testing.TB, cli Client, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := Join(ctx, cli, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeNode(t, n) })
	return n
}

// joinWithEvents joins a node whose callbacks are ChanCallbacks(buffer),
// and returns it with the events channel and the drop counter.
func joinWithEvents(t testing.TB, cli Client, cfg Config, buffer int) (*Node, <-chan Event, func() uint64) {
	t.Helper()
	cb, events, dropped := ChanCallbacks(buffer)
	cfg.Callbacks = cb
	return join(t, cli, cfg), events, dropped
}

func closeNode(t testing.TB, n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = n.Close(ctx)
}

// stableErr returns nil once nodes agree on a ring of exactly their IDs and
// every partition is served by its ring owner, as every node sees it.
func stableErr(nodes []*Node) error { return fleettest.StableErr(nodes) }

// waitStable waits, on the nodes' Changed signals, until stableErr is nil.
func waitStable(t testing.TB, timeout time.Duration, nodes ...*Node) {
	t.Helper()
	require.NoError(t, waitFor(timeout, func() error { return stableErr(nodes) }, nodes...))
}

// waitFor re-evaluates cond whenever one of the nodes publishes a new
// routing snapshot, until it returns nil or timeout passes.
func waitFor(timeout time.Duration, cond func() error, nodes ...*Node) error {
	return fleettest.WaitFor(timeout, cond, fleettest.Changes(nodes...)...)
}

// etcdClaims returns the owner and epoch of every claim in etcd.
func etcdClaims(t testing.TB, cli *clientv3.Client, cluster string) map[int]fleettest.Claim {
	return fleettest.EtcdClaims(t, cli, cluster)
}

// etcdMembers returns the member IDs registered in etcd.
func etcdMembers(t testing.TB, cli *clientv3.Client, cluster string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := keys.New(cluster)
	resp, err := cli.Get(ctx, l.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var ids []string
	for _, kv := range resp.Kvs {
		id, _ := l.MemberID(string(kv.Key))
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// observerAgrees reports how o's routes differ from n's, nil if they do
// not: owner, address and epoch of every partition.
func observerAgrees(o *fleet.Observer, n *Node, parts int) error {
	return fleettest.ObserverAgrees(o, n, parts)
}

// waitObserver waits, on the observer's and the nodes' Changed signals,
// until cond returns nil.
func waitObserver(t *testing.T, o *fleet.Observer, cond func() error, nodes ...*Node) {
	t.Helper()
	fleettest.WaitObserver(t, o, cond, nodes...)
}

// placed reports whether a placement gives partition p of r another owner
// than the ring's own.
func placed(r *ring.Ring, p int) bool {
	owner, _ := r.Owner(p)
	ringOwner, _ := r.RingOwner(p)
	return owner != ringOwner
}

// label returns the label of the cause a tenure ended with ("moved",
// "lost" or "closed"), as metrics and logs name it.
func label(cause error) string {
	r, _ := reasonOf(cause)
	return r.String()
}

// txnHook is a Client over a real etcd whose transactions commit through
// commit: it gets each transaction's context and the operations of its
// Then, and commits it with do, or holds, counts or races it first.
type txnHook struct {
	*clientv3.Client
	commit func(ctx context.Context, then []clientv3.Op, do func() (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error)
}

func (c *txnHook) Txn(ctx context.Context) clientv3.Txn {
	return &hookedTxn{Txn: c.Client.Txn(ctx), c: c, ctx: ctx}
}

// hookedTxn is a transaction of a txnHook's.
type hookedTxn struct {
	clientv3.Txn
	c    *txnHook
	ctx  context.Context
	then []clientv3.Op
}

func (t *hookedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *hookedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *hookedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	t.then = append(t.then, ops...)
	return t
}

func (t *hookedTxn) Commit() (*clientv3.TxnResponse, error) {
	return t.c.commit(t.ctx, t.then, t.Txn.Commit)
}
