package ownership

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/cluster"
)

// readyGate is a Client over a real etcd whose transactions that write
// readiness keys are counted and, while hold is set, wait for release
// before they commit (entered says that one waits).
type readyGate struct {
	txnHook
	prefix  string
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
	txns    atomic.Int64 // transactions that wrote readiness keys
}

func newReadyGate(cli *clientv3.Client, prefix string, buffer int) *readyGate {
	g := &readyGate{txnHook: txnHook{Client: cli}, prefix: prefix, entered: make(chan struct{}, buffer), release: make(chan struct{})}
	g.commit = g.commitTxn
	return g
}

func (g *readyGate) commitTxn(_ context.Context, then []clientv3.Op, do func() (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	if slices.ContainsFunc(then, func(op clientv3.Op) bool { return strings.HasPrefix(string(op.KeyBytes()), g.prefix) }) {
		g.txns.Add(1)
		if g.hold.Load() {
			g.entered <- struct{}{}
			<-g.release
		}
	}
	return do()
}

// TestReadinessWritesCoalesce: the readiness keys of preparations that end
// while a write of readiness keys is in flight wait for it and go
// together in the next transaction, rather than one transaction each; the
// holder still hands every partition over warm. A successor, n1, prepares
// its share of a leaving node's partitions; its first readiness write is
// held at etcd's door while its other preparations end.
func TestReadinessWritesCoalesce(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 48, "warm-ready-batch"
	lay := keys.New(name)
	var leaving atomic.Bool
	held := make(chan preparing, P)
	var mu sync.Mutex
	warm := map[int]bool{} // by partition n1 acquired after the leave: prepared
	config := func(id string) Config {
		cfg := testConfig(t, name, id, P)
		cfg.WarmTimeout = time.Minute
		cfg.Callbacks = Callbacks{
			OnPrepare: holdPrepare(id, &leaving, held),
			OnAcquired: func(e Event) {
				if id == "n1" && leaving.Load() {
					mu.Lock()
					warm[e.Partition] = !e.Prepared.IsZero()
					mu.Unlock()
				}
			},
		}
		return cfg
	}
	gate := newReadyGate(c.NewClient(t), lay.ReadyPrefix(), P)
	n1 := join(t, gate, config("n1"))
	waitStable(t, 30*time.Second, n1) // n2's join then moves claims, and the fleet records the handover feature
	n2 := join(t, cli, config("n2"))
	waitStable(t, 30*time.Second, n1, n2)
	waitRequires(t, cli, name, fleetview.FeatureHandover)
	n3 := join(t, cli, config("n3"))
	waitStable(t, 30*time.Second, n1, n2, n3)
	owned := n3.Owned()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	leaving.Store(true)
	gate.hold.Store(true)
	before := gate.txns.Load()
	closed := make(chan error, 1)
	go func() { closed <- n3.Close(ctx) }()
	var mine []preparing // n1's, in the order they started
	for range owned {
		select {
		case pr := <-held:
			if pr.node == "n1" {
				mine = append(mine, pr)
			} else {
				close(pr.done)
			}
		case <-ctx.Done():
			t.Fatal("the preparations of the leave never started")
		}
	}
	require.GreaterOrEqual(t, len(mine), 4, "n1 prepares a share of the leave")

	// n1's first preparation ends: its readiness write starts, and waits.
	close(mine[0].done)
	select {
	case <-gate.entered:
	case <-ctx.Done():
		t.Fatal("n1 never wrote its first readiness key")
	}
	for _, pr := range mine[1:] {
		close(pr.done)
	}
	// The other preparations return, and n1's loop queues their
	// readiness behind the write in flight, in the microseconds of a post;
	// the held write, once let go, takes etcd's commit, a millisecond or
	// more, to return: so the next write finds every readiness queued,
	// unless the loop had not taken them all yet, which splits them in
	// two.
	gate.hold.Store(false)
	close(gate.release)
	require.NoError(t, <-closed)
	waitStable(t, 30*time.Second, n1, n2)
	leaving.Store(false) // the moves of the nodes' closing at the end are not held

	writes := gate.txns.Load() - before
	t.Logf("n1: %d readiness keys in %d transactions", len(mine), writes)
	assert.LessOrEqual(t, writes, int64(3), "n1's %d readiness keys", len(mine))
	mu.Lock()
	defer mu.Unlock()
	for _, pr := range mine {
		assert.True(t, warm[pr.p], "partition %d handed to n1 warm", pr.p)
	}
}
