package memetcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/memetcd"
)

// OnCommit sees every revision in order, a write whose response was lost
// included, with the server clock's time.
func TestOnCommit(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	require.NoError(t, err)
	defer srv.Close()
	type seen struct {
		rev  int64
		key  string
		at   time.Time
		kind mvccpb.Event_EventType
	}
	var got []seen
	srv.OnCommit(func(at time.Time, evs []*mvccpb.Event) {
		for _, ev := range evs {
			got = append(got, seen{ev.Kv.ModRevision, string(ev.Kv.Key), at, ev.Type})
		}
	})
	cli := srv.NewClient()
	defer cli.Close()
	ctx := context.Background()
	_, err = cli.Put(ctx, "a", "1")
	require.NoError(t, err)
	fc.Advance(time.Second)
	srv.LoseResponses(cli.ID(), 1)
	_, err = cli.Put(ctx, "b", "2")
	require.Error(t, err, "the response was lost")
	_, err = cli.Delete(ctx, "a")
	require.NoError(t, err)
	srv.OnCommit(nil)
	_, err = cli.Put(ctx, "c", "3")
	require.NoError(t, err)

	t0 := fc.Now().Add(-time.Second)
	assert.Equal(t, []seen{
		{2, "a", t0, mvccpb.PUT},
		{3, "b", t0.Add(time.Second), mvccpb.PUT},
		{4, "a", t0.Add(time.Second), mvccpb.DELETE},
	}, got)
}

// OnTxn sees a transaction before it is applied, on a goroutine that may
// call the server (here: revoke the lease the transaction compares, so
// that it fails), and then its result; a partitioned client's
// transaction, which is not applied, is not seen.
func TestOnTxn(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	require.NoError(t, err)
	defer srv.Close()
	cli, admin := srv.NewClient(), srv.NewClient()
	defer cli.Close()
	defer admin.Close()
	ctx := context.Background()
	lease, err := admin.Grant(ctx, 10)
	require.NoError(t, err)
	_, err = admin.Put(ctx, "member", "m", clientv3.WithLease(lease.ID))
	require.NoError(t, err)

	var ids []memetcd.ClientID
	var results []bool
	srv.OnTxn(func(id memetcd.ClientID, req *pb.TxnRequest) func(*pb.TxnResponse, error) {
		ids = append(ids, id)
		if _, err := admin.Revoke(ctx, lease.ID); err != nil {
			t.Errorf("revoke from the hook: %v", err)
		}
		return func(resp *pb.TxnResponse, err error) {
			require.NoError(t, err)
			results = append(results, resp.Succeeded)
		}
	})
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue("member"), "=", int64(lease.ID))).
		Then(clientv3.OpPut("claim", "c")).Commit()
	require.NoError(t, err)
	assert.False(t, resp.Succeeded, "the lease was revoked before the transaction was applied")

	srv.Partition(cli.ID())
	pctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = cli.Txn(pctx).Then(clientv3.OpPut("x", "1")).Commit()
	require.Error(t, err)
	srv.Heal(cli.ID())
	srv.OnTxn(nil)
	_, err = cli.Txn(ctx).Then(clientv3.OpPut("y", "1")).Commit()
	require.NoError(t, err)
	assert.Equal(t, []memetcd.ClientID{cli.ID()}, ids)
	assert.Equal(t, []bool{false}, results)
}
