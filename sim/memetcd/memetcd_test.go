package memetcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/sim/memetcd"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newServer returns a server on a fake clock and one client, closed when
// the test ends.
func newServer(t *testing.T, cfg memetcd.Config) (*memetcd.Server, *clockwork.FakeClock, *memetcd.Client) {
	t.Helper()
	fc := clockwork.NewFakeClock()
	cfg.Clock = fc
	s, err := memetcd.New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, fc, s.NewClient()
}

// next receives one watch response or fails the test.
func next(t *testing.T, ch clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case wr, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return wr
	case <-time.After(5 * time.Second):
		t.Fatal("no watch response")
	}
	return clientv3.WatchResponse{}
}

func TestConfigValidate(t *testing.T) {
	_, err := memetcd.New(memetcd.Config{MaxTxnOps: -1})
	assert.ErrorIs(t, err, memetcd.ErrInvalidConfig)
	_, err = memetcd.New(memetcd.Config{MinLeaseTTL: -time.Second})
	assert.ErrorIs(t, err, memetcd.ErrInvalidConfig)
	d := memetcd.DefaultConfig()
	assert.Equal(t, memetcd.DefaultMaxTxnOps, d.MaxTxnOps)
	assert.Equal(t, memetcd.DefaultMinLeaseTTL, d.MinLeaseTTL)
}

func TestRevisionsAndVersions(t *testing.T) {
	s, _, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	assert.EqualValues(t, 1, s.Revision())
	p1, err := c.Put(ctx, "k", "a")
	require.NoError(t, err)
	p2, err := c.Put(ctx, "k", "b", clientv3.WithPrevKV())
	require.NoError(t, err)
	assert.EqualValues(t, 2, p1.Header.Revision)
	assert.EqualValues(t, 3, p2.Header.Revision)
	assert.Equal(t, "a", string(p2.PrevKv.Value))
	g, err := c.Get(ctx, "k")
	require.NoError(t, err)
	kv := g.Kvs[0]
	assert.EqualValues(t, 2, kv.CreateRevision)
	assert.EqualValues(t, 3, kv.ModRevision)
	assert.EqualValues(t, 2, kv.Version)
	// A delete of nothing changes nothing.
	d, err := c.Delete(ctx, "nothing")
	require.NoError(t, err)
	assert.EqualValues(t, 3, d.Header.Revision)
	old, err := c.Get(ctx, "k", clientv3.WithRev(2))
	require.NoError(t, err)
	assert.Equal(t, "a", string(old.Kvs[0].Value))
	_, err = c.Get(ctx, "k", clientv3.WithRev(10))
	assert.ErrorIs(t, err, rpctypes.ErrFutureRev)
}

func TestTxnOpsLimit(t *testing.T) {
	_, _, c := newServer(t, memetcd.Config{MaxTxnOps: 4})
	ctx := testCtx(t)
	ops := func(n int) []clientv3.Op {
		out := make([]clientv3.Op, n)
		for i := range out {
			out[i] = clientv3.OpPut("k"+string(rune('a'+i)), "v")
		}
		return out
	}
	_, err := c.Txn(ctx).Then(ops(4)...).Commit()
	require.NoError(t, err)
	_, err = c.Txn(ctx).Then(ops(5)...).Commit()
	assert.True(t, etcderr.TooManyOps(err), "got %v", err)
	assert.ErrorIs(t, err, rpctypes.ErrTooManyOps)
	// Nested transactions share the budget: 3 outer ops leave 1 inside.
	nested := clientv3.OpTxn(nil, ops(2), nil)
	_, err = c.Txn(ctx).Then(nested, clientv3.OpGet("x"), clientv3.OpGet("y")).Commit()
	assert.ErrorIs(t, err, rpctypes.ErrTooManyOps)
}

func TestTxnNestedResponses(t *testing.T) {
	_, _, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	_, err := c.Put(ctx, "claim", "x")
	require.NoError(t, err)
	resp, err := c.Txn(ctx).Then(
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("claim"), "=", 0)},
			[]clientv3.Op{clientv3.OpPut("claim", "me")}, []clientv3.Op{clientv3.OpGet("claim")}),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("free"), "=", 0)},
			[]clientv3.Op{clientv3.OpPut("free", "me")}, []clientv3.Op{clientv3.OpGet("free")}),
	).Commit()
	require.NoError(t, err)
	require.Len(t, resp.Responses, 2)
	first := resp.Responses[0].GetResponseTxn()
	assert.False(t, first.Succeeded)
	assert.Equal(t, "x", string(first.Responses[0].GetResponseRange().Kvs[0].Value))
	assert.True(t, resp.Responses[1].GetResponseTxn().Succeeded)
	assert.EqualValues(t, 3, resp.Header.Revision)
	// Putting a key twice in one transaction is refused.
	_, err = c.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpPut("d", "2")).Commit()
	assert.ErrorIs(t, err, rpctypes.ErrDuplicateKey)
}

func TestLeaseExpiresOnFakeClock(t *testing.T) {
	s, fc, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	g, err := c.Grant(ctx, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 2, g.TTL, "etcd's minimum TTL")
	_, err = c.Put(ctx, "a", "1", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	_, err = c.Put(ctx, "b", "1", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	wch := c.Watch(ctx, "", clientv3.WithFromKey(), clientv3.WithRev(s.Revision()+1))

	fc.Advance(1999 * time.Millisecond)
	ttl, err := c.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	require.NoError(t, err)
	assert.EqualValues(t, 0, ttl.TTL, "truncated to seconds")
	assert.Len(t, ttl.Keys, 2)
	fc.Advance(time.Millisecond)

	// The timer revokes the lease without any call; both keys go in one
	// revision, in key order.
	wr := next(t, wch)
	require.Len(t, wr.Events, 2)
	assert.Equal(t, mvccpb.DELETE, wr.Events[0].Type)
	assert.Equal(t, "a", string(wr.Events[0].Kv.Key))
	assert.Equal(t, "b", string(wr.Events[1].Kv.Key))
	assert.Equal(t, wr.Events[0].Kv.ModRevision, wr.Events[1].Kv.ModRevision)
	assert.EqualValues(t, 4, s.Revision())

	_, err = c.KeepAliveOnce(ctx, g.ID)
	assert.True(t, etcderr.LeaseNotFound(err))
	_, err = c.Revoke(ctx, g.ID)
	assert.ErrorIs(t, err, rpctypes.ErrLeaseNotFound)
	_, err = c.Put(ctx, "c", "1", clientv3.WithLease(g.ID))
	assert.ErrorIs(t, err, rpctypes.ErrLeaseNotFound)
	ttl, err = c.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL)
}

func TestLeaseExpiresLazilyInOrder(t *testing.T) {
	s, fc, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	late, err := c.Grant(ctx, 5)
	require.NoError(t, err)
	early, err := c.Grant(ctx, 3)
	require.NoError(t, err)
	_, err = c.Put(ctx, "late", "x", clientv3.WithLease(late.ID))
	require.NoError(t, err)
	_, err = c.Put(ctx, "early", "x", clientv3.WithLease(early.ID))
	require.NoError(t, err)
	start := s.Revision()
	fc.Advance(time.Minute)
	// The next request sees both expiries applied, earliest first, one
	// revision each, whatever the timer goroutine has done.
	g, err := c.Get(ctx, "early")
	require.NoError(t, err)
	assert.Empty(t, g.Kvs)
	assert.Equal(t, start+2, g.Header.Revision)
	old, err := c.Get(ctx, "late", clientv3.WithRev(start+1))
	require.NoError(t, err)
	assert.Len(t, old.Kvs, 1, "the earlier lease went first")
}

func TestKeepAliveOnFakeClock(t *testing.T) {
	_, fc, c := newServer(t, memetcd.Config{})
	ctx, cancel := context.WithCancel(testCtx(t))
	g, err := c.Grant(ctx, 3)
	require.NoError(t, err)
	ch, err := c.KeepAlive(ctx, g.ID)
	require.NoError(t, err)
	first := <-ch
	assert.EqualValues(t, 3, first.TTL)
	for range 5 {
		require.NoError(t, fc.BlockUntilContext(ctx, 2)) // the lease timer and the renewal wait
		fc.Advance(time.Second)
		<-ch
	}
	ttl, err := c.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	assert.Positive(t, ttl.TTL, "kept alive past its TTL")
	cancel()
	for range ch { // closed when ctx ends
	}
}

func TestLeaderChangeRestartsCountdown(t *testing.T) {
	s, fc, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	g, err := c.Grant(ctx, 10)
	require.NoError(t, err)
	fc.Advance(9 * time.Second)
	s.LeaderChange()
	fc.Advance(9 * time.Second)
	ttl, err := c.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 2, ttl.TTL, "10s TTL + 1s election timeout restarted 9s ago")
	fc.Advance(2 * time.Second)
	ttl, err = c.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL)
}

func TestLoseLeader(t *testing.T) {
	s, fc, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	g, err := c.Grant(ctx, 2)
	require.NoError(t, err)
	wch := c.Watch(clientv3.WithRequireLeader(ctx), "k")
	s.LoseLeader()
	wr := <-wch
	assert.ErrorIs(t, wr.Err(), rpctypes.ErrNoLeader)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = c.Put(short, "k", "v")
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = c.Put(clientv3.WithRequireLeader(ctx), "k", "v")
	assert.ErrorIs(t, err, rpctypes.ErrNoLeader)
	fc.Advance(time.Minute) // no lease expires without a leader
	s.LeaderChange()
	ttl, err := c.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 3, ttl.TTL)
}

func TestCompactionAndWatch(t *testing.T) {
	s, _, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	for _, v := range []string{"1", "2", "3"} {
		_, err := c.Put(ctx, "k", v)
		require.NoError(t, err)
	}
	_, err := c.Compact(ctx, 3)
	require.NoError(t, err)
	_, err = c.Compact(ctx, 3)
	assert.ErrorIs(t, err, rpctypes.ErrCompacted)
	_, err = c.Get(ctx, "k", clientv3.WithRev(2))
	assert.ErrorIs(t, err, rpctypes.ErrCompacted)
	g, err := c.Get(ctx, "k", clientv3.WithRev(3))
	require.NoError(t, err)
	assert.Equal(t, "2", string(g.Kvs[0].Value))

	wr := next(t, c.Watch(ctx, "k", clientv3.WithRev(2)))
	assert.True(t, wr.Canceled)
	assert.EqualValues(t, 3, wr.CompactRevision)
	assert.ErrorIs(t, wr.Err(), rpctypes.ErrCompacted)

	wch := c.Watch(ctx, "k", clientv3.WithRev(3), clientv3.WithPrevKV())
	wr = next(t, wch)
	require.Len(t, wr.Events, 2)
	assert.EqualValues(t, 3, wr.Events[0].Kv.ModRevision)
	assert.Nil(t, wr.Events[0].PrevKv, "its previous revision is compacted")
	assert.Equal(t, "2", string(wr.Events[1].PrevKv.Value))
	assert.EqualValues(t, 4, s.Revision())
}

func TestWatchContextClosesChannel(t *testing.T) {
	_, _, c := newServer(t, memetcd.Config{})
	ctx, cancel := context.WithCancel(testCtx(t))
	wch := c.Watch(ctx, "k")
	cancel()
	for range wch {
	}
}

func TestPartitionAndHeal(t *testing.T) {
	s, _, c := newServer(t, memetcd.Config{})
	other := s.NewClient()
	ctx := testCtx(t)
	wch := c.Watch(ctx, "k")
	s.Partition(c.ID())

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := c.Put(short, "k", "lost")
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = other.Put(ctx, "k", "other")
	require.NoError(t, err, "other clients are unaffected")
	select {
	case <-wch:
		t.Fatal("a partitioned client received a watch event")
	case <-time.After(20 * time.Millisecond):
	}

	done := make(chan error, 1)
	go func() {
		_, err := c.Put(ctx, "k", "after")
		done <- err
	}()
	s.Heal(c.ID())
	require.NoError(t, <-done, "a waiting request proceeds at Heal")
	wr := next(t, wch)
	assert.Equal(t, "other", string(wr.Events[0].Kv.Value))
	wr = next(t, wch)
	assert.Equal(t, "after", string(wr.Events[0].Kv.Value))
}

func TestLoseResponses(t *testing.T) {
	s, _, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	s.LoseResponses(c.ID(), 1)
	_, err := c.Put(ctx, "k", "v")
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	g, err := c.Get(ctx, "k")
	require.NoError(t, err)
	assert.Len(t, g.Kvs, 1, "the write landed although its answer was lost")
}

func TestLatencyOnFakeClock(t *testing.T) {
	s, fc, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	s.SetLatency(c.ID(), time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := c.Put(ctx, "k", "v")
		done <- err
	}()
	require.NoError(t, fc.BlockUntilContext(ctx, 1))
	assert.EqualValues(t, 1, s.Revision(), "not applied before the request delay")
	fc.Advance(time.Second)
	require.NoError(t, fc.BlockUntilContext(ctx, 1))
	assert.EqualValues(t, 2, s.Revision(), "applied, answer on its way")
	fc.Advance(time.Second)
	require.NoError(t, <-done)
}

func TestDropWatchesResumes(t *testing.T) {
	s, _, c := newServer(t, memetcd.Config{})
	ctx := testCtx(t)
	wch := c.Watch(ctx, "k")
	_, err := c.Put(ctx, "k", "1")
	require.NoError(t, err)
	next(t, wch)
	s.DropWatches(c.ID())
	_, err = c.Put(ctx, "k", "2")
	require.NoError(t, err)
	wr := next(t, wch)
	assert.Equal(t, "2", string(wr.Events[0].Kv.Value), "resumed without loss or duplicate")
}

func TestClosedClient(t *testing.T) {
	_, _, c := newServer(t, memetcd.Config{})
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	<-c.Ctx().Done()
	_, err := c.Get(context.Background(), "k")
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.Canceled))
	assert.Equal(t, codes.Canceled, status.Code(err))
}

// TestDeterministic runs one random sequence twice and requires identical
// raw results, lease IDs and revisions included.
func TestDeterministic(t *testing.T) {
	run := func() ([]string, []clientv3.LeaseID) {
		s, err := memetcd.New(memetcd.Config{Clock: clockwork.NewFakeClock(), MinLeaseTTL: time.Second})
		require.NoError(t, err)
		defer s.Close()
		c := s.NewClient()
		return runOpsRaw(t, c, "/d/", genOps(7, conformanceOps))
	}
	log1, ids1 := run()
	log2, ids2 := run()
	assert.Equal(t, log1, log2)
	assert.Equal(t, ids1, ids2)
	assert.NotEmpty(t, ids1)
}
