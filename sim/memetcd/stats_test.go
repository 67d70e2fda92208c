package memetcd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/memetcd"
)

func TestStats(t *testing.T) {
	s, _, a := newServer(t, memetcd.Config{})
	b := s.NewClient()
	ctx := testCtx(t)

	w := b.Watch(ctx, "k", clientv3.WithPrefix())
	_, err := a.Put(ctx, "k1", "v")
	require.NoError(t, err)
	_, err = a.Get(ctx, "k1")
	require.NoError(t, err)
	// A txn with a write branch counts as a write even when it takes the
	// read branch; a read-only txn is a read.
	_, err = a.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("k1"), "=", 0)).
		Then(clientv3.OpPut("k1", "x")).Else(clientv3.OpGet("k1")).Commit()
	require.NoError(t, err)
	_, err = a.Txn(ctx).Then(clientv3.OpGet("k1"), clientv3.OpGet("k2")).Commit()
	require.NoError(t, err)
	l, err := a.Grant(ctx, 5)
	require.NoError(t, err)
	_, err = a.KeepAliveOnce(ctx, l.ID)
	require.NoError(t, err)
	_, err = a.Txn(ctx).Then(clientv3.OpPut("k2", "v"), clientv3.OpDelete("k1")).Commit()
	require.NoError(t, err)
	for got := 0; got < 3; {
		resp := <-w
		require.NoError(t, resp.Err())
		got += len(resp.Events)
	}

	want := memetcd.Stats{Requests: 7, Reads: 2, Writes: 4, KeepAlives: 1, Revisions: 2}
	assert.Equal(t, want, a.Stats())
	assert.Equal(t, memetcd.Stats{WatchResponses: 2, WatchEvents: 3}, b.Stats())
	assert.Equal(t, want.Add(b.Stats()), s.Stats())
	assert.Equal(t, memetcd.Stats{Requests: 7}, s.Stats().Sub(memetcd.Stats{Reads: 2, Writes: 4, KeepAlives: 1, Revisions: 2, WatchResponses: 2, WatchEvents: 3}))
}

func TestReconnect(t *testing.T) {
	s, _, a := newServer(t, memetcd.Config{})
	b := s.NewClient()
	ctx := testCtx(t)

	w := b.Watch(ctx, "k", clientv3.WithPrefix())
	_, err := a.Put(ctx, "k0", "v")
	require.NoError(t, err)
	require.Len(t, (<-w).Events, 1)
	s.Partition(b.ID())
	for _, k := range []string{"k1", "k2", "k3"} {
		_, err := a.Put(ctx, k, "v")
		require.NoError(t, err)
	}
	// Back on a new connection, the watch resumes and catches up on the
	// three revisions it missed in one response.
	s.Reconnect(b.ID())
	resp := <-w
	require.NoError(t, resp.Err())
	require.Len(t, resp.Events, 3)
	assert.Equal(t, "k1", string(resp.Events[0].Kv.Key))
	_, err = b.Get(ctx, "k1")
	assert.NoError(t, err, "no longer partitioned")
}
