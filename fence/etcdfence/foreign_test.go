package etcdfence_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

// This file holds the tests of floors raised by writers other than a Store:
// an operator's etcdctl, a script, a process of another build. Admission
// depends only on the floor etcd records, so every write path of a Store
// that has been writing long enough to remember floors refuses a token
// below a floor raised behind its back.

const foreignScopes = 16

// foreignEpoch is the epoch the Store writes under; foreignFloor the floor
// raised behind its back, in the Store's own encoding.
const (
	foreignEpoch = 10
	foreignFloor = "0000000000000000015"
)

func foreignToken(i int) fence.Token {
	return fence.Token{Scope: fence.PartitionScope(i), Epoch: foreignEpoch}
}

// commitRound commits one write per scope at foreignEpoch, to keys of
// round, and returns the results.
func commitRound(ctx context.Context, t *testing.T, s *etcdfence.Store, round int) []etcdfence.Result {
	t.Helper()
	writes := make([]etcdfence.Write, foreignScopes)
	for i := range writes {
		writes[i] = etcdfence.Write{Kind: etcdfence.KindPut, Token: foreignToken(i), Key: fmt.Sprintf("k%d", i), Value: []byte(fmt.Sprintf("r%d", round))}
	}
	res, err := s.Commit(ctx, writes)
	require.NoError(t, err)
	return res
}

// warmCommits runs the 20 rounds of Commit over 16 scopes after which a
// Store remembers every floor.
func warmCommits(ctx context.Context, t *testing.T, s *etcdfence.Store) {
	t.Helper()
	for round := range 20 {
		for i, r := range commitRound(ctx, t, s, round) {
			require.NoError(t, r.Err, "round %d, scope %d", round, i)
		}
	}
}

// requireRefusedAfterForeignRaise checks res, a round at foreignEpoch over
// the 16 scopes after the floor of scope 3 was raised to 15: scope 3's
// write is refused as stale and its key keeps its value of before; every
// other write is admitted.
func requireRefusedAfterForeignRaise(t *testing.T, cli *clientv3.Client, s *etcdfence.Store, res []etcdfence.Result, before string) {
	t.Helper()
	for i, r := range res {
		if i == 3 {
			fencetest.RequireStale(t, r.Err, "p/3", foreignEpoch, 15)
			continue
		}
		require.NoError(t, r.Err, "scope %d", i)
	}
	got, err := cli.Get(fencetest.Context(t), etcdfence.DataPrefix(s)+"k3")
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	require.Equal(t, before, string(got.Kvs[0].Value), "the refused write must not land")
}

// TestForeignFloorCommit: a plain etcd Put of a floor, after 20 rounds of
// Commit over 16 scopes, refuses the next Commit's write below it.
func TestForeignFloorCommit(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-commit")
	warmCommits(ctx, t, s)
	_, err := cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), foreignFloor)
	require.NoError(t, err)
	requireRefusedAfterForeignRaise(t, cli, s, commitRound(ctx, t, s, 20), "r19")
}

// TestForeignFloorCompareAndSwap: the same for a compare-and-swap and a
// delete inside a Commit over many scopes.
func TestForeignFloorCompareAndSwap(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-cas")
	warmCommits(ctx, t, s)
	_, err := cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), foreignFloor)
	require.NoError(t, err)
	writes := make([]etcdfence.Write, foreignScopes)
	for i := range writes {
		writes[i] = etcdfence.Write{Kind: etcdfence.KindPut, Token: foreignToken(i), Key: fmt.Sprintf("k%d", i), Value: []byte("r20")}
	}
	writes[3] = etcdfence.Write{Kind: etcdfence.KindCompareAndSwap, Token: foreignToken(3), Key: "k3", Version: 20, Value: []byte("r20")}
	writes = append(writes, etcdfence.Write{Kind: etcdfence.KindDelete, Token: foreignToken(3), Key: "k3"})
	res, err := s.Commit(ctx, writes)
	require.NoError(t, err)
	fencetest.RequireStale(t, res[foreignScopes].Err, "p/3", foreignEpoch, 15)
	requireRefusedAfterForeignRaise(t, cli, s, res[:foreignScopes], "r19")
}

// TestForeignFloorPut: Store.Put refuses the same way.
func TestForeignFloorPut(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-put")
	warmCommits(ctx, t, s)
	_, err := cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), foreignFloor)
	require.NoError(t, err)
	_, err = s.Put(ctx, foreignToken(3), "k3", []byte("r20"))
	fencetest.RequireStale(t, err, "p/3", foreignEpoch, 15)
	_, err = s.Delete(ctx, foreignToken(3), "k3")
	fencetest.RequireStale(t, err, "p/3", foreignEpoch, 15)
	got, err := cli.Get(ctx, etcdfence.DataPrefix(s)+"k3")
	require.NoError(t, err)
	require.Equal(t, "r19", string(got.Kvs[0].Value))
}

// TestForeignFloorRewrite: a plain etcd Put that rewrites a floor to the
// value it holds, after 20 rounds of Commit over 16 scopes, changes no
// admission: the next round commits every write. A raise behind the
// Store's back after that is refused as before.
func TestForeignFloorRewrite(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-rewrite")
	warmCommits(ctx, t, s)
	_, err := cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), "0000000000000000010")
	require.NoError(t, err)
	for i, r := range commitRound(ctx, t, s, 20) {
		require.NoError(t, r.Err, "scope %d", i)
	}
	got, err := cli.Get(ctx, etcdfence.DataPrefix(s)+"k3")
	require.NoError(t, err)
	require.Equal(t, "r20", string(got.Kvs[0].Value))
	_, err = cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), foreignFloor)
	require.NoError(t, err)
	requireRefusedAfterForeignRaise(t, cli, s, commitRound(ctx, t, s, 21), "r20")
}

// batcherRound puts one write per scope at foreignEpoch through bt from
// 16 goroutines at once and returns their errors by scope.
func batcherRound(ctx context.Context, bt *etcdfence.Batcher, round int) []error {
	errs := make([]error, foreignScopes)
	var wg sync.WaitGroup
	for i := range foreignScopes {
		wg.Go(func() {
			_, errs[i] = bt.Put(ctx, foreignToken(i), fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("r%d", round)))
		})
	}
	wg.Wait()
	return errs
}

// TestForeignFloorBatcher: a Batcher whose batches span many scopes, after
// 20 rounds, refuses a write below a floor raised by a plain etcd Put. The
// Batcher lingers so that each round's 16 writes share batches.
func TestForeignFloorBatcher(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-batcher")
	bt, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{Linger: 20 * time.Millisecond})
	require.NoError(t, err)
	defer bt.Close()
	for round := range 20 {
		for i, err := range batcherRound(ctx, bt, round) {
			require.NoError(t, err, "round %d, scope %d", round, i)
		}
	}
	_, err = cli.Put(ctx, etcdfence.FloorKey(s, "p/3"), foreignFloor)
	require.NoError(t, err)
	res := make([]etcdfence.Result, foreignScopes)
	for i, err := range batcherRound(ctx, bt, 20) {
		res[i].Err = err
	}
	requireRefusedAfterForeignRaise(t, cli, s, res, "r19")
}

// TestForeignFloorOlderBuild: a writer that raises a floor in the
// single-write form's layout, floor and write in one transaction and
// nothing else (as a build of another version might), is respected by the
// next Commit over many scopes.
func TestForeignFloorOlderBuild(t *testing.T) {
	ctx, cli, s := setup(t, "foreign-build")
	warmCommits(ctx, t, s)
	floor := etcdfence.FloorKey(s, "p/3")
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(floor), ">", foreignFloor)).
		Then(clientv3.OpGet(floor)).
		Else(clientv3.OpPut(floor, foreignFloor), clientv3.OpPut(etcdfence.DataPrefix(s)+"k3", "other build")).
		Commit()
	require.NoError(t, err)
	require.False(t, resp.Succeeded, "the other build's write is admitted")
	requireRefusedAfterForeignRaise(t, cli, s, commitRound(ctx, t, s, 20), "other build")
}
