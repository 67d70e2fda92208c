package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// servedByRing returns nil once every node's ring is made of exactly ring
// (sorted) and every partition is served by its ring owner at the epoch
// every node sees.
func servedByRing(nodes []*ownership.Node, ring []string) error {
	byID := map[string]*ownership.Node{}
	for _, n := range nodes {
		byID[n.ID()] = n
		if got := n.Ring().Members(); !slices.Equal(got, ring) {
			return fmt.Errorf("%s computes a ring of %v, want %v", n.ID(), got, ring)
		}
	}
	for p := range nodes[0].Ring().Partitions() {
		owner, _ := nodes[0].Ring().Owner(p)
		want := byID[owner].LookupPartition(p)
		if !want.Local || want.Epoch == 0 {
			return fmt.Errorf("partition %d: ring owner %s does not serve it", p, owner)
		}
		for _, n := range nodes {
			if r := n.LookupPartition(p); r.Owner != owner || r.Epoch != want.Epoch {
				return fmt.Errorf("partition %d: %s sees %+v, owner serves %+v", p, n.ID(), r, want)
			}
		}
	}
	return nil
}

func newOperator(t *testing.T, cli *clientv3.Client, cluster string) *fleet.Operator {
	t.Helper()
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: cluster})
	require.NoError(t, err)
	return op
}

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestOperatorDrain: a drained node stays a member and serves nothing, the
// nodes and an Observer agree on the ring without it, and undrain gives it
// partitions back.
func TestOperatorDrain(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts, name = 16, "drain"
	a := join(t, cli, testConfig(t, name, "a", parts))
	b, evB, _ := joinWithEvents(t, cli, testConfig(t, name, "b", parts), 16*parts)
	d := join(t, cli, testConfig(t, name, "d", parts))
	nodes := []*ownership.Node{a, b, d}
	waitStable(t, 20*time.Second, nodes...)
	held := len(b.Owned())
	ctx := opCtx(t)
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor}})
	require.NoError(t, err)
	defer o.Close()

	op := newOperator(t, cli, name)
	_, err = op.Drain(ctx, "b", fleet.Action{Actor: "tester"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	_, err = op.Drain(ctx, "zz", fleet.Action{Actor: "tester", Reason: "r"})
	require.ErrorIs(t, err, fleet.ErrNotFound)
	_, err = op.Undrain(ctx, "b", fleet.Action{Actor: "tester"})
	require.ErrorIs(t, err, fleet.ErrNotFound)

	rec, err := op.Drain(ctx, "b", fleet.Action{Actor: "tester", Reason: "kernel upgrade"})
	require.NoError(t, err)
	assert.Equal(t, "drain", rec.Action)
	assert.Equal(t, "node/b", rec.Target)
	assert.Positive(t, rec.Revision)

	require.NoError(t, waitFor(20*time.Second, func() error {
		if len(b.Owned()) != 0 {
			return fmt.Errorf("b still owns %v", b.Owned())
		}
		return servedByRing(nodes, []string{"a", "d"})
	}, nodes...))
	assert.Equal(t, []string{"a", "b", "d"}, memberIDs(b.Members()), "a drained node stays a member")
	moved := 0
	for moved < held {
		select {
		case ev := <-evB:
			if ev.Kind == ownership.EventReleased {
				require.Equal(t, ownership.ErrMoved, ev.Reason, "a drain hands off as a planned move")
				moved++
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d partitions reported moved", moved, held)
		}
	}
	waitObserver(t, o, func() error { return observerAgrees(o, a, parts) }, nodes...)

	st, err := op.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, st.Drained)
	assert.Equal(t, []string{"b"}, st.Idle)
	assert.True(t, len(st.Unowned) == 0 && len(st.Handoffs) == 0, "%+v", st)
	assert.Equal(t, a.Ring().Version(), st.RingVersion)
	ms, err := op.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	assert.True(t, ms[1].Drained)
	require.NotNil(t, ms[1].Drain)
	assert.Equal(t, "kernel upgrade", ms[1].Drain.Reason)
	assert.Positive(t, ms[1].TTLLeft)

	_, err = op.Undrain(ctx, "b", fleet.Action{Actor: "tester"})
	require.NoError(t, err)
	waitStable(t, 20*time.Second, nodes...)
	assert.NotEmpty(t, b.Owned())
	waitObserver(t, o, func() error { return observerAgrees(o, a, parts) }, nodes...)

	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, []string{"drain", "undrain"}, []string{recs[0].Action, recs[1].Action})
	assert.Equal(t, "tester", recs[1].Actor)
}

func memberIDs(ms []fleet.Member) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestOperatorForceRelease: the holder's context is cancelled, the
// partition is claimed again at a higher epoch whose fence floor refuses
// the old token, the audit record says who, why, and both epochs, and a
// release guarded by the old epoch leaves the new holder alone.
func TestOperatorForceRelease(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts, name = 8, "force"
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	cfgA := testConfig(t, name, "a", parts)
	cfgA.Fencers = []fence.Fencer{store}
	cfgB := testConfig(t, name, "b", parts)
	cfgB.Fencers = []fence.Fencer{store}
	a := join(t, cli, cfgA)
	b := join(t, cli, cfgB)
	waitStable(t, 20*time.Second, a, b)
	ctx := opCtx(t)

	p := a.Owned()[0]
	h, err := a.HoldPartition(p)
	require.NoError(t, err)
	old := h.Token
	oldCtx := h.Context
	h.Release()
	since := a.LookupPartition(p).Since
	assert.False(t, since.IsZero(), "a claim records its acquire time")
	_, err = store.Put(ctx, old, "k", []byte("v1"))
	require.NoError(t, err)

	op := newOperator(t, cli, name)
	ps, err := op.Partitions(ctx)
	require.NoError(t, err)
	assert.Equal(t, fleet.PartitionStatus{Partition: p, Owner: "a", Addr: "a.test:7000", Epoch: old.Epoch, Since: since, Next: "a"}, ps[p])

	_, err = op.ForceRelease(ctx, fence.PartitionScope(p), fleet.Action{Actor: "tester"})
	require.ErrorIs(t, err, fleet.ErrInvalidConfig)
	_, err = op.ForceRelease(ctx, fence.PartitionScope(parts), fleet.Action{Actor: "tester", Reason: "r"})
	require.ErrorIs(t, err, fleet.ErrInvalidPartition)

	rec, err := op.ForceRelease(ctx, fence.PartitionScope(p), fleet.Action{Actor: "tester", Reason: "stuck consumer"})
	require.NoError(t, err)
	assert.Equal(t, "force-release", rec.Action)
	assert.Equal(t, fence.PartitionScope(p), rec.Target)
	assert.Equal(t, "a", rec.Holder)
	assert.Equal(t, old.Epoch, rec.OldEpoch)

	select {
	case <-oldCtx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the old holder's context was not cancelled")
	}
	require.NoError(t, waitFor(20*time.Second, func() error {
		if r := a.LookupPartition(p); !r.Local || r.Epoch <= old.Epoch {
			return fmt.Errorf("partition %d: %+v", p, r)
		}
		return nil
	}, a, b))
	newEpoch := a.LookupPartition(p).Epoch
	_, err = store.Put(ctx, old, "k", []byte("zombie"))
	require.ErrorIs(t, err, fence.ErrStale, "the old token is fenced out")

	// Guarded by the old epoch: the new holder is left alone.
	_, err = op.ForceRelease(ctx, fence.PartitionScope(p), fleet.Action{Actor: "tester", Reason: "again", Epoch: old.Epoch})
	require.ErrorIs(t, err, fleet.ErrNotFound)
	assert.Equal(t, newEpoch, etcdClaims(t, cli, name)[p].Epoch)

	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	got := recs[0]
	assert.Equal(t, "tester", got.Actor)
	assert.Equal(t, "stuck consumer", got.Reason)
	assert.False(t, got.Time.IsZero())
	assert.Equal(t, old.Epoch, got.OldEpoch)
	assert.Equal(t, newEpoch, got.NewEpoch)
	none, err := op.Audit(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestOperatorForceReleaseLeader: the leader key of an election is deleted
// under the epoch guard and audited; the next leader's epoch is reported.
func TestOperatorForceReleaseLeader(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := opCtx(t)
	const name = "lead"
	l := keys.New(name)
	require.NoError(t, createSpec(ctx, cli, l, ring.DefaultConfig().Spec()))
	put := func(k, v string) int64 {
		resp, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
		return resp.Header.Revision
	}
	e1 := put(l.Leader("sched")+"1", `{"id":"n1"}`)
	put(l.Leader("sched")+"2", `{"id":"n2"}`)

	op := newOperator(t, cli, name)
	ls, err := op.Leaders(ctx, "")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	assert.Equal(t, fleet.LeaderStatus{Election: "sched", Holder: "n1", Epoch: e1, Key: l.Leader("sched") + "1", Candidates: 2}, ls[0])

	_, err = op.ForceRelease(ctx, fence.LeaderScope("sched"), fleet.Action{Actor: "tester", Reason: "r", Epoch: e1 + 100})
	require.ErrorIs(t, err, fleet.ErrNotFound)
	rec, err := op.ForceRelease(ctx, fence.LeaderScope("sched"), fleet.Action{Actor: "tester", Reason: "wedged"})
	require.NoError(t, err)
	assert.Equal(t, "n1", rec.Holder)
	assert.Equal(t, e1, rec.OldEpoch)
	_, err = op.ForceRelease(ctx, fence.LeaderScope("none"), fleet.Action{Actor: "tester", Reason: "r"})
	require.ErrorIs(t, err, fleet.ErrNotFound)

	ls, err = op.Leaders(ctx, "")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	assert.Equal(t, "n2", ls[0].Holder)
	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, fence.LeaderScope("sched"), recs[0].Target)
	assert.Zero(t, recs[0].NewEpoch, "n2's key predates the release")
	e3 := put(l.Leader("sched")+"0", `{"id":"n3"}`)
	_, err = cli.Delete(ctx, l.Leader("sched")+"2")
	require.NoError(t, err)
	recs, err = op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, e3, recs[0].NewEpoch)
}

// TestClaimValueForms: claims written as the bare node ID and as JSON with
// the acquire time (as nodes write them) decode alike, and an
// undecodable-looking value is a bare ID.
func TestClaimValueForms(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 123456789, time.UTC)
	assert.Equal(t, keys.Claim{Node: "n1"}, keys.DecodeClaim([]byte("n1")))
	assert.Equal(t, keys.Claim{Node: "n1", Since: at}, keys.DecodeClaim([]byte(keys.EncodeClaim("n1", at))))
	assert.Equal(t, keys.Claim{Node: "{x"}, keys.DecodeClaim([]byte("{x")))
	assert.Equal(t, keys.Claim{Node: `{"since":"x"}`}, keys.DecodeClaim([]byte(`{"since":"x"}`)))

	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := opCtx(t)
	const name = "forms"
	l := keys.New(name)
	require.NoError(t, createSpec(ctx, cli, l, ring.Config{Partitions: 4, LoadFactor: ring.DefaultConfig().LoadFactor}.Spec()))
	for id, v := range map[string]string{"old": "old", "new": keys.EncodeClaim("new", at)} {
		_, err := cli.Put(ctx, l.Member(id), `{"id":"`+id+`","addr":"`+id+`:1"}`)
		require.NoError(t, err)
		_, err = cli.Put(ctx, l.Claim(map[string]int{"old": 0, "new": 1}[id]), v)
		require.NoError(t, err)
	}
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ring.Config{Partitions: 4, LoadFactor: ring.DefaultConfig().LoadFactor}})
	require.NoError(t, err)
	defer o.Close()
	r0, r1 := o.LookupPartition(0), o.LookupPartition(1)
	assert.Equal(t, "old", r0.Owner)
	assert.True(t, r0.Since.IsZero())
	assert.Equal(t, "new", r1.Owner)
	assert.Equal(t, "new:1", r1.Addr)
	assert.True(t, at.Equal(r1.Since))

	op := newOperator(t, cli, name)
	ps, err := op.Partitions(ctx)
	require.NoError(t, err)
	assert.Equal(t, "old", ps[0].Owner)
	assert.True(t, at.Equal(ps[1].Since))
}

func TestOperatorConfig(t *testing.T) {
	_, err := fleet.NewOperator(nil, fleet.OperatorConfig{Cluster: "x"})
	assert.ErrorIs(t, err, fleet.ErrNilArgument)
	var typed *clientv3.Client
	_, err = fleet.NewOperator(typed, fleet.OperatorConfig{Cluster: "x"})
	assert.ErrorIs(t, err, fleet.ErrNilArgument)
	_, err = fleet.NewOperator(&clientv3.Client{}, fleet.OperatorConfig{})
	assert.ErrorIs(t, err, fleet.ErrInvalidConfig)
	assert.True(t, errors.Is(fleet.Action{}.Check(false), fleet.ErrInvalidConfig))
}

// TestOperatorForceReleaseElection: force release of a real election's
// leader ends its term; the next term has a higher epoch and its fencer
// refuses the old leader's token.
func TestOperatorForceReleaseElection(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := opCtx(t)
	const name = "elect"
	require.NoError(t, createSpec(ctx, cli, keys.New(name), ring.DefaultConfig().Spec()))
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = sess.Close(context.Background()) }()
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "sched", ID: "n1", Fencers: []fence.Fencer{store}})
	require.NoError(t, err)
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	old := term.Token()
	_, err = store.Put(ctx, old, "s", []byte("v1"))
	require.NoError(t, err)

	op := newOperator(t, cli, name)
	rec, err := op.ForceRelease(ctx, fence.LeaderScope("sched"), fleet.Action{Actor: "tester", Reason: "wedged leader"})
	require.NoError(t, err)
	assert.Equal(t, "n1", rec.Holder)
	assert.Equal(t, old.Epoch, rec.OldEpoch)
	select {
	case <-term.Done():
	case <-ctx.Done():
		t.Fatal("the released term did not end")
	}

	next, err := e.Campaign(ctx)
	require.NoError(t, err)
	assert.Greater(t, next.Token().Epoch, old.Epoch)
	_, err = store.Put(ctx, old, "s", []byte("zombie"))
	require.ErrorIs(t, err, fence.ErrStale)
	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, next.Token().Epoch, recs[0].NewEpoch)
	require.NoError(t, next.Resign(ctx))
}
