package etcdfence

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestBatchForming queues writes in a known order (each is submitted once
// the one before it waits in the queue, behind a commit slot the test
// holds) and checks how batches form from
// them: Puts to one key under one token are coalesced, a stale coalesced
// group is refused while its neighbours commit, a Delete of the same key
// waits for the next transaction and the Put after it for the one after
// that, so one key's writes apply in the order received. Every write's
// outcome is the one it gets when the same writes go one by one to a
// Store, in the same order.
func TestBatchForming(t *testing.T) {
	for _, noCoalesce := range []bool{false, true} {
		name := "coalesce"
		if noCoalesce {
			name = "no-coalesce"
		}
		t.Run(name, func(t *testing.T) { testBatchForming(t, noCoalesce) })
	}
}

func testBatchForming(t *testing.T, noCoalesce bool) {
	c := cluster.New(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Prefix: "/forming/data/", ClusterPrefix: "/forming/"}
	single, err := New(c.NewClient(t), Config{Prefix: "/single/data/", ClusterPrefix: "/single/"})
	require.NoError(t, err)
	admin, err := New(c.NewClient(t), cfg)
	require.NoError(t, err)
	// The batcher's Store has never seen the floor: etcd, not the cache,
	// refuses the stale writes.
	grouped, err := New(c.NewClient(t), cfg)
	require.NoError(t, err)

	old := fence.Token{Scope: "p/1", Epoch: 5}
	cur := fence.Token{Scope: "p/1", Epoch: 9}
	for _, s := range []*Store{single, admin} {
		require.NoError(t, s.Advance(ctx, cur))
	}
	writes := []Write{
		0: {Kind: KindPut, Token: cur, Key: "hot", Value: []byte("v0")},
		1: {Kind: KindPut, Token: cur, Key: "hot", Value: []byte("v1")}, // coalesced into 0's group
		2: {Kind: KindPut, Token: old, Key: "a", Value: []byte("stale")},
		3: {Kind: KindPut, Token: cur, Key: "hot", Value: []byte("v3")}, // coalesced: hot's writes so far are Puts under cur
		4: {Kind: KindDelete, Token: cur, Key: "hot"},                   // next transaction
		5: {Kind: KindPut, Token: cur, Key: "hot", Value: []byte("v5")}, // the one after
		6: {Kind: KindPut, Token: cur, Key: "b", Value: []byte("vb")},
		7: {Kind: KindPut, Token: old, Key: "hot2", Value: []byte("x")},
		8: {Kind: KindPut, Token: old, Key: "hot2", Value: []byte("y")}, // a stale coalesced group
	}

	want := make([]Result, len(writes))
	for i, w := range writes {
		want[i] = single.apply(ctx, w)
	}

	b, err := NewBatcher(grouped, BatcherConfig{NoCoalesce: noCoalesce})
	require.NoError(t, err)
	// Take the only commit slot, as a commit in flight would: every write
	// queues, in the order submitted.
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
	got := make([]Result, len(writes))
	done := make(chan int, len(writes))
	for i, w := range writes {
		go func() {
			got[i] = b.do(ctx, w)
			done <- i
		}()
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.queue) == i+1
		}, 10*time.Second, time.Millisecond, "write %d queued", i)
	}
	// The commit "ends": the committer takes the queue.
	b.mu.Lock()
	b.inFlight--
	b.signal()
	b.mu.Unlock()
	for range writes {
		<-done
	}
	b.Close()

	for i := range writes {
		require.Equal(t, outcome(want[i]), outcome(got[i]), "write %d (%s %s)", i, writes[i].Kind, writes[i].Key)
	}
	rev := got[0].Revision
	for _, i := range []int{0, 6} {
		require.Equal(t, rev, got[i].Revision, "write %d in the first transaction", i)
	}
	st := b.Stats()
	if noCoalesce {
		require.Zero(t, st.Coalesced)
		// hot's writes 0, 1, 3, 4, 5 each take a transaction.
		require.Less(t, got[0].Revision, got[1].Revision)
		require.Less(t, got[1].Revision, got[3].Revision)
		require.Less(t, got[3].Revision, got[4].Revision)
	} else {
		require.Equal(t, uint64(3), st.Coalesced, "1 and 3 into 0, 8 into 7")
		require.Equal(t, uint64(3), st.Commits, "hot's Delete and the Put after it wait a transaction each")
		require.Equal(t, rev, got[1].Revision, "a coalesced Put shares its group's revision")
		require.Equal(t, rev, got[3].Revision)
		require.Less(t, rev, got[4].Revision, "the Delete comes after the group")
	}
	require.Less(t, got[4].Revision, got[5].Revision, "the Put comes after the Delete")
	require.Equal(t, uint64(len(writes)), st.Writes)

	it, err := admin.Get(ctx, cur, "hot")
	require.NoError(t, err)
	require.Equal(t, "v5", string(it.Value))
	require.Equal(t, int64(1), it.Version, "recreated after the Delete")
	for _, key := range []string{"a", "hot2"} {
		it, err := admin.Get(ctx, cur, key)
		require.NoError(t, err)
		require.False(t, it.Exists(), "stale write to %s", key)
	}
}

// outcome is what of a Result a batch must not change: all but the
// revision.
func outcome(r Result) any {
	var se *fence.StaleError
	switch {
	case r.Err == nil:
		return struct{ Deleted bool }{r.Deleted}
	case errors.As(r.Err, &se):
		return *se
	}
	return r.Err.Error()
}

// TestHandoffSkipsAbandonedWrites: a committer waits for the writers it
// answered to run again before it closes the next batch (handoff.wait). A
// writer whose context ended while its write was in flight has gone, and
// must not be waited for: the next batch commits. If the committer counted
// it, the next write would never commit.
func TestHandoffSkipsAbandonedWrites(t *testing.T) {
	c := cluster.New(t, 1)
	kv := &gatedKV{KV: c.NewClient(t), entered: make(chan struct{}), release: make(chan struct{})}
	s, err := New(kv, Config{Prefix: "/handoff/data/", ClusterPrefix: "/handoff/"})
	require.NoError(t, err)
	b, err := NewBatcher(s, BatcherConfig{})
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok := fence.Token{Scope: "p/1", Epoch: 1}

	// Queue A and B behind a commit slot the test holds.
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
	ctxA, abandon := context.WithCancel(ctx)
	defer abandon()
	results := make(chan Result, 2)
	for i, key := range []string{"a", "b"} {
		wctx := ctx
		if key == "a" {
			wctx = ctxA
		}
		go func() { results <- b.do(wctx, Write{Kind: KindPut, Token: tok, Key: key, Value: []byte(key)}) }()
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.queue) == i+1
		}, 10*time.Second, time.Millisecond, "write %s queued", key)
	}
	// The committer takes both and commits them; the commit is held until
	// A's caller has gone.
	kv.hold.Store(true)
	b.mu.Lock()
	b.inFlight--
	b.signal()
	b.mu.Unlock()
	<-kv.entered
	abandon()
	first := <-results
	require.ErrorIs(t, first.Err, context.Canceled, "A's caller returns when its context ends")
	kv.hold.Store(false)
	kv.release <- struct{}{}
	second := <-results
	require.NoError(t, second.Err, "B is answered")

	// B writes again: the committer, which answered A and B, must not wait
	// for A.
	again, cancelAgain := context.WithTimeout(ctx, 15*time.Second)
	defer cancelAgain()
	_, err = b.Put(again, tok, "b", []byte("again"))
	require.NoError(t, err, "the next batch commits")
	it, err := s.Get(ctx, tok, "a")
	require.NoError(t, err)
	require.Equal(t, "a", string(it.Value), "A's write was in flight when its caller left: it may apply, and here it did")
}

// gatedKV is a clientv3.KV over a real etcd whose transactions, while hold
// is set, signal entered and wait for release before they commit.
type gatedKV struct {
	clientv3.KV
	hold             atomic.Bool
	entered, release chan struct{}
}

func (g *gatedKV) Txn(ctx context.Context) clientv3.Txn {
	return &gatedTxn{Txn: g.KV.Txn(ctx), kv: g}
}

type gatedTxn struct {
	clientv3.Txn
	kv *gatedKV
}

func (t *gatedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *gatedTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *gatedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *gatedTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.kv.hold.Load() {
		t.kv.entered <- struct{}{}
		<-t.kv.release
	}
	return t.Txn.Commit()
}

// TestGatherReturns checks a committer's estimate of the writers that come
// back after a batch: it starts at all of them, falls when few come back
// (writers spread over several Batchers), never waits for fewer than one,
// and rises again once gathers get every writer they wait for.
func TestGatherReturns(t *testing.T) {
	const back = 15
	r := returns{share: returnsOne}
	require.Equal(t, back, r.expect(back))
	require.Equal(t, 0, r.expect(0))
	for range 20 {
		r.observe(back, r.expect(back), 5) // a third come back
	}
	require.InDelta(t, 5, r.expect(back), 1)
	for range 40 {
		r.observe(back, r.expect(back), 0)
	}
	require.Equal(t, 1, r.expect(back))
	for range 80 {
		e := r.expect(back)
		r.observe(back, e, e) // every writer waited for comes
	}
	require.Equal(t, back, r.expect(back))
}
