package etcdfence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	cfg := Config{Prefix: "/forming/data/", FencePrefix: "/forming/fence/"}
	single, err := New(c.NewClient(t), Config{Prefix: "/single/data/", FencePrefix: "/single/fence/"})
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
		0: PutWrite(cur, "hot", []byte("v0")),
		1: PutWrite(cur, "hot", []byte("v1")), // coalesced into 0's group
		2: PutWrite(old, "a", []byte("stale")),
		3: PutWrite(cur, "hot", []byte("v3")), // coalesced: hot's writes so far are Puts under cur
		4: DeleteWrite(cur, "hot"),            // next transaction
		5: PutWrite(cur, "hot", []byte("v5")), // the one after
		6: PutWrite(cur, "b", []byte("vb")),
		7: PutWrite(old, "hot2", []byte("x")),
		8: PutWrite(old, "hot2", []byte("y")), // a stale coalesced group
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
			got[i] = b.Do(ctx, w)
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
	require.NoError(t, b.Close())

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
