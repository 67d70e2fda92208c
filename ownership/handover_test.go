package ownership

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// waitRequires waits, on a watch of the spec key, until the fleet's spec
// records feature.
func waitRequires(t testing.TB, cli *clientv3.Client, name, feature string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := keys.New(name).Spec()
	resp, err := cli.Get(ctx, k)
	require.NoError(t, err)
	has := func(kvs []*mvccpb.KeyValue) bool {
		if len(kvs) == 0 {
			return false
		}
		s, err := fleetview.DecodeStored(kvs[0].Value, kvs[0].ModRevision)
		return err == nil && fleetview.Has(s.Requires, feature)
	}
	if has(resp.Kvs) {
		return
	}
	for wr := range cli.Watch(ctx, k, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if has([]*mvccpb.KeyValue{ev.Kv}) {
				return
			}
		}
	}
	t.Fatalf("the spec never required %q", feature)
}

// claimEvents returns, by partition, the events of the claim keys of name
// from revision from+1 to the current revision.
func claimEvents(t testing.TB, cli *clientv3.Client, name string, from int64) map[int][]*clientv3.Event {
	t.Helper()
	l := keys.New(name)
	out := map[int][]*clientv3.Event{}
	for _, ev := range watchedEvents(t, cli, l.Claims(), from, clientv3.WithPrefix()) {
		if p, ok := l.ClaimPartition(string(ev.Kv.Key)); ok {
			out[p] = append(out[p], ev)
		}
	}
	return out
}

// watchedEvents returns the events of key (with opts) from revision
// from+1 to the current revision: it watches, and asks for progress after
// each response until the watch has passed the revision read first.
func watchedEvents(t testing.TB, cli *clientv3.Client, key string, from int64, opts ...clientv3.OpOption) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now, err := cli.Get(ctx, key, clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	require.NoError(t, err)
	if now.Header.Revision <= from {
		return nil
	}
	var out []*clientv3.Event
	wctx := clientv3.WithRequireLeader(ctx) // RequestProgress reaches the watch's stream by its context
	wc := cli.Watch(wctx, key, append(opts, clientv3.WithRev(from+1))...)
	require.NoError(t, cli.RequestProgress(wctx))
	for wr := range wc {
		require.NoError(t, wr.Err())
		out = append(out, wr.Events...)
		switch {
		case wr.IsProgressNotify() && wr.Header.Revision >= now.Header.Revision:
			return out // etcd sends it once every event up to its revision is delivered
		case len(wr.Events) > 0 && wr.Events[len(wr.Events)-1].Kv.ModRevision >= now.Header.Revision:
			return out
		}
		require.NoError(t, cli.RequestProgress(wctx))
	}
	t.Fatal("the watch ended before it reached the current revision")
	return nil
}

// TestHandoverOneWrite: once the fleet requires the handover feature
// (recorded by the node itself, on its first planned move, every member
// having it), a planned move is one etcd write: each moved claim is put
// once, by its holder, with the successor's ID and lease, never deleted;
// its epoch (ModRevision) is that write's revision, above the holder's;
// the successor serves it at that epoch; the moves of a join cost a
// handful of revisions, not one per partition; and the claim guard refuses
// the previous holder's token (a hidden writer paused over the move).
func TestHandoverOneWrite(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 64, "handover"
	cfg1 := testConfig(t, name, "n1", P)
	buf := &testsupport.Buffer{}
	cfg1.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	n1 := join(t, cli, cfg1)
	waitStable(t, 30*time.Second, n1)
	n2 := join(t, cli, testConfig(t, name, "n2", P))
	waitStable(t, 30*time.Second, n1, n2)
	waitRequires(t, cli, name, fleetview.FeatureHandover)
	waitLogged(t, buf, 20*time.Second, func(lines []map[string]any) error {
		if findLog(lines, "the fleet requires the handover feature", map[string]any{"node": "n1"}) == nil {
			return fmt.Errorf("no line of the record")
		}
		if findLog(lines, "released ", map[string]any{"node": "n1", "reason": "moved", "handed_over": 0}) == nil {
			return fmt.Errorf("no released line of the first move, by deletion")
		}
		return nil
	})

	before := etcdClaims(t, cli, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r0, err := cli.Get(ctx, keys.New(name).Spec())
	require.NoError(t, err)

	n3 := join(t, cli, testConfig(t, name, "n3", P))
	waitStable(t, 30*time.Second, n1, n2, n3)
	after := etcdClaims(t, cli, name)
	evs := claimEvents(t, cli, name, r0.Header.Revision)

	moved := 0
	revs := map[int64]bool{}
	var stale fence.Token
	for p, c := range after {
		if c.Owner != "n3" {
			continue
		}
		moved++
		old := before[p]
		require.Contains(t, []string{"n1", "n2"}, old.Owner, "partition %d", p)
		require.Len(t, evs[p], 1, "partition %d: one write moves the claim", p)
		ev := evs[p][0]
		assert.Equal(t, mvccpb.PUT, ev.Type, "partition %d: handed over, not deleted", p)
		assert.Equal(t, old.Epoch, ev.Kv.CreateRevision, "partition %d: the claim the holder had, rewritten", p)
		assert.Equal(t, ev.Kv.ModRevision, c.Epoch, "partition %d: the epoch is the hand-over's revision", p)
		assert.Greater(t, c.Epoch, old.Epoch, "partition %d: the epoch rises", p)
		assert.Equal(t, c.Epoch, n3.LookupPartition(p).Epoch, "partition %d: the successor serves at the new epoch", p)
		revs[ev.Kv.ModRevision] = true
		stale = fence.Token{Scope: fence.PartitionScope(p), Epoch: old.Epoch}
		if moved == 1 {
			// A writer of the previous holder, paused over the move.
			_, err := etcdfence.ClaimGuarded(ctx, cli, keys.New(name).Claim(p), stale, clientv3.OpPut("/hidden/"+name, "stale"))
			require.ErrorIs(t, err, fence.ErrStale, "the previous holder's token after the hand-over")
			var se *fence.StaleError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, c.Epoch, se.Current)
			_, err = etcdfence.ClaimGuarded(ctx, cli, keys.New(name).Claim(p), fence.Token{Scope: stale.Scope, Epoch: c.Epoch}, clientv3.OpPut("/hidden/"+name, "current"))
			require.NoError(t, err, "the successor's token")
		}
	}
	require.Positive(t, moved, "the join moved partitions to n3")
	waitLogged(t, buf, 20*time.Second, func(lines []map[string]any) error {
		for _, l := range findLogs(lines, "released ", map[string]any{"node": "n1", "reason": "moved"}) {
			if h, _ := l["handed_over"].(float64); h > 0 && h == l["count"] {
				return nil
			}
		}
		return fmt.Errorf("no released line whose partitions were all handed over")
	})
	assert.LessOrEqual(t, len(revs), 6, "%d partitions handed over in %d revisions", moved, len(revs))
	t.Logf("join: %d partitions handed over in %d revisions", moved, len(revs))

	// A graceful leave hands over too, in a handful of revisions.
	r1, err := cli.Get(ctx, keys.New(name).Spec())
	require.NoError(t, err)
	held := slices.Clone(n3.Owned())
	closeNode(t, n3)
	waitStable(t, 30*time.Second, n1, n2)
	evs = claimEvents(t, cli, name, r1.Header.Revision)
	revs = map[int64]bool{}
	for _, p := range held {
		for _, ev := range evs[p] {
			assert.Equal(t, mvccpb.PUT, ev.Type, "partition %d: handed over on leave: %v", p, evs[p])
			revs[ev.Kv.ModRevision] = true
		}
	}
	assert.LessOrEqual(t, len(revs), 6, "leave: %d partitions in %d revisions", len(held), len(revs))
	t.Logf("leave: %d partitions handed over in %d revisions", len(held), len(revs))
}

// TestHandoverOlderBuild: while a member lacks the handover feature, the
// spec does not record it and planned moves delete their claims (a build
// that reads an epoch as the CreateRevision never meets a handed-over
// claim).
func TestHandoverOlderBuild(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 32, "handover-old"
	old := slices.DeleteFunc(slices.Clone(fleetview.Features()), func(f string) bool { return f == fleetview.FeatureHandover })
	n1 := join(t, cli, testConfig(t, name, "n1", P))
	n2 := join(t, cli, olderBuild(testConfig(t, name, "n2", P), old...))
	waitStable(t, 30*time.Second, n1, n2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r0, err := cli.Get(ctx, keys.New(name).Spec())
	require.NoError(t, err)
	n3 := join(t, cli, testConfig(t, name, "n3", P))
	waitStable(t, 30*time.Second, n1, n2, n3)
	evs := claimEvents(t, cli, name, r0.Header.Revision)
	deleted := 0
	for _, es := range evs {
		for _, ev := range es {
			if ev.Type == mvccpb.PUT {
				assert.Equal(t, ev.Kv.CreateRevision, ev.Kv.ModRevision, "a claim is only ever created")
			} else {
				deleted++
			}
		}
	}
	assert.Positive(t, deleted, "the moves deleted their claims")
	s, err := cli.Get(ctx, keys.New(name).Spec())
	require.NoError(t, err)
	spec, err := fleetview.DecodeStored(s.Kvs[0].Value, s.Kvs[0].ModRevision)
	require.NoError(t, err)
	assert.NotContains(t, spec.Requires, fleetview.FeatureHandover)
}

// TestHandoverRefused: a hand-over to a successor whose lease is not the
// one its member key is bound to (it died, or rejoined) is refused by etcd
// and leaves the holder's claim as it was, and the deletion that follows
// ends it; the holder's token is refused after either.
func TestHandoverRefused(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 8, "handover-refused"
	n1 := join(t, cli, testConfig(t, name, "n1", P))
	waitStable(t, 30*time.Second, n1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A successor whose lease has ended: its member key is gone with it.
	g, err := cli.Grant(ctx, 5)
	require.NoError(t, err)
	lay := keys.New(name)
	_, err = cli.Put(ctx, lay.Member("ghost"), "{}", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	_, err = cli.Revoke(ctx, g.ID)
	require.NoError(t, err)

	const p = 3
	claim := etcdClaims(t, cli, name)[p]
	require.Equal(t, "n1", claim.Owner)
	to := []successor{{id: "ghost", lease: g.ID}}
	put := clientv3.OpPut(lay.Handoff("n1"), "")
	_, out, err := n1.deleteTxn(ctx, []int{p}, []int64{claim.Epoch}, to, 0, time.Now(), put)
	require.NoError(t, err)
	require.False(t, out[0].ok, "handed over to a successor whose lease ended")
	require.NotNil(t, out[0].kv)
	assert.Equal(t, claim.Epoch, keys.ClaimEpoch(out[0].kv), "the claim stands as it was")
	assert.Equal(t, "n1", keys.DecodeClaim(out[0].kv.Value).Node)
	assert.Equal(t, claim, etcdClaims(t, cli, name)[p])

	// The fallback: the claim is deleted; n1, its ring owner, claims it
	// again at a higher epoch.
	_, out, err = n1.deleteTxn(ctx, []int{p}, []int64{claim.Epoch}, []successor{{}}, 0, time.Now(), put)
	require.NoError(t, err)
	require.True(t, out[0].ok)
	require.NoError(t, waitFor(30*time.Second, func() error {
		if e := n1.LookupPartition(p).Epoch; e <= claim.Epoch {
			return fmt.Errorf("partition %d served at epoch %d", p, e)
		}
		return nil
	}, n1))
	_, err = etcdfence.ClaimGuarded(ctx, cli, lay.Claim(p), fence.Token{Scope: fence.PartitionScope(p), Epoch: claim.Epoch}, clientv3.OpPut("/hidden/"+name, "stale"))
	require.ErrorIs(t, err, fence.ErrStale)
}
