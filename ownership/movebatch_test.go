package ownership

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/cluster"
)

// countedFencer is a SQL fencer that counts its calls, Advance and
// AdvanceAll alike.
type countedFencer struct {
	sqlfence.Fencer
	calls atomic.Int64
}

func (c *countedFencer) Advance(ctx context.Context, t fence.Token) error {
	c.calls.Add(1)
	return c.Fencer.Advance(ctx, t)
}

func (c *countedFencer) AdvanceAll(ctx context.Context, ts []fence.Token) error {
	c.calls.Add(1)
	return c.Fencer.AdvanceAll(ctx, ts)
}

// preparing is a preparation held by a test until it lets it return
// (holdPrepare).
type preparing struct {
	p    int
	node string
	done chan struct{}
}

// holdPrepare returns node id's OnPrepare that, once leaving is set, sends
// each preparation to held and returns once the test closes its done (or
// the move is over); it returns at once before.
func holdPrepare(id string, leaving *atomic.Bool, held chan<- preparing) func(Event) error {
	return func(e Event) error {
		if !leaving.Load() {
			return nil
		}
		pr := preparing{p: e.Partition, node: id, done: make(chan struct{})}
		held <- pr
		select {
		case <-pr.done:
		case <-e.Context.Done():
		}
		return nil
	}
}

// TestPrepareLeaveBatches: a graceful leave of a node with many
// partitions, the prepare phase on and the successors' preparations ending
// one at a time (each readiness key put in a revision of its own before
// the next preparation returns), hands every claim over in a handful of
// revisions, not one per partition, deletes the successors' readiness
// keys in those revisions, and each successor raises its floors (on a
// SQLite fencer shared by the fleet) in a handful of calls.
func TestPrepareLeaveBatches(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 64, "warm-leave-batch"
	lay := keys.New(name)
	sf, _ := openSQLiteFencer(t)
	var leaving atomic.Bool
	held := make(chan preparing, P)
	config := func(id string) (Config, *countedFencer) {
		cfg := testConfig(t, name, id, P)
		cfg.WarmTimeout = time.Minute
		f := &countedFencer{Fencer: sf}
		cfg.Fencers = []fence.Fencer{f}
		cfg.Callbacks = Callbacks{OnPrepare: holdPrepare(id, &leaving, held)}
		return cfg, f
	}
	cfg1, f1 := config("n1")
	n1 := join(t, cli, cfg1)
	waitStable(t, 30*time.Second, n1)
	cfg2, f2 := config("n2")
	n2 := join(t, cli, cfg2)
	waitStable(t, 30*time.Second, n1, n2)
	waitRequires(t, cli, name, fleetview.FeatureHandover)
	cfg3, _ := config("n3")
	n3 := join(t, cli, cfg3)
	waitStable(t, 30*time.Second, n1, n2, n3)

	owned := n3.Owned()
	require.GreaterOrEqual(t, len(owned), 12, "n3 holds many partitions")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r0, err := cli.Get(ctx, lay.Spec())
	require.NoError(t, err)
	calls := map[string]int64{"n1": f1.calls.Load(), "n2": f2.calls.Load()}

	// The readiness keys put from here on, as they are put.
	readyC := make(chan readyKey, 4*P)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wc := cli.Watch(wctx, lay.ReadyPrefix(), clientv3.WithPrefix(), clientv3.WithRev(r0.Header.Revision+1))
	go func() {
		defer close(readyC)
		for wr := range wc {
			for _, ev := range wr.Events {
				if p, id, ok := lay.ReadyKey(string(ev.Kv.Key)); ok && ev.Type == mvccpb.PUT {
					readyC <- readyKey{p: p, node: id}
				}
			}
		}
	}()

	leaving.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- n3.Close(ctx) }()
	// Each preparation returns once the one before it is ready in etcd.
	wait := map[int]bool{}
	for _, p := range owned {
		wait[p] = true
	}
	for len(wait) > 0 {
		var pr preparing
		select {
		case pr = <-held:
		case <-ctx.Done():
			t.Fatalf("preparations of %d partitions never started", len(wait))
		}
		close(pr.done)
		for r := range readyC {
			if r.p == pr.p && r.node == pr.node {
				break
			}
		}
		delete(wait, pr.p)
	}
	require.NoError(t, <-closed)
	waitStable(t, 30*time.Second, n1, n2)
	leaving.Store(false) // the moves of the nodes' closing at the end are not held

	evs := claimEvents(t, cli, name, r0.Header.Revision)
	revs := map[int64]bool{}
	for _, p := range owned {
		require.Len(t, evs[p], 1, "partition %d: moved by one write", p)
		assert.Equal(t, mvccpb.PUT, evs[p][0].Type, "partition %d: handed over", p)
		revs[evs[p][0].Kv.ModRevision] = true
	}
	t.Logf("leave: %d partitions handed over in %d revisions; successors' fencer calls: n1 %d, n2 %d",
		len(owned), len(revs), f1.calls.Load()-calls["n1"], f2.calls.Load()-calls["n2"])
	// The readiness keys went with the claims, in the hand-over
	// transactions: no successor spent a write of its own on them.
	deleted := 0
	for _, ev := range watchedEvents(t, cli, lay.ReadyPrefix(), r0.Header.Revision, clientv3.WithPrefix()) {
		if ev.Type == mvccpb.DELETE {
			deleted++
			assert.True(t, revs[ev.Kv.ModRevision], "readiness key %s deleted at revision %d, not by a hand-over", ev.Kv.Key, ev.Kv.ModRevision)
		}
	}
	assert.Equal(t, len(owned), deleted, "readiness keys deleted")
	left, err := cli.Get(ctx, lay.ReadyPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Zero(t, left.Count, "readiness keys left")
	assert.LessOrEqual(t, len(revs), 3, "%d partitions handed over in %d revisions", len(owned), len(revs))
	assert.LessOrEqual(t, f1.calls.Load()-calls["n1"], int64(3), "n1's fencer calls")
	assert.LessOrEqual(t, f2.calls.Load()-calls["n2"], int64(3), "n2's fencer calls")
}
