package etcdfence_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// newStore returns a Store whose data and floors live under their own
// prefix named after the test, so that stores in one test never share.
func newStore(t testing.TB, cli *clientv3.Client, name string) *etcdfence.Store {
	t.Helper()
	cfg := etcdfence.DefaultConfig()
	cfg.Prefix = "/test/" + name + "/data/"
	cfg.ClusterPrefix = "/test/" + name + "/"
	s, err := etcdfence.New(cli, cfg)
	require.NoError(t, err)
	return s
}

// claimEpoch creates (or re-creates) a claim key and returns its
// CreateRevision: a real epoch, as ownership would issue it.
func claimEpoch(t testing.TB, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx := fencetest.Context(t)
	_, err := cli.Delete(ctx, key)
	require.NoError(t, err)
	r, err := cli.Put(ctx, key, "owner")
	require.NoError(t, err)
	return r.Header.Revision
}

// dump returns every key under prefix (with the prefix cut) and its value.
func dump(t testing.TB, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cli.Get(fencetest.Context(t), prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[strings.TrimPrefix(string(kv.Key), prefix)] = fmt.Sprintf("%s#v%d", kv.Value, kv.Version)
	}
	return m
}

// setup starts a one-member etcd for the test and returns a test context,
// a client and a Store named name.
func setup(t testing.TB, name string) (context.Context, *clientv3.Client, *etcdfence.Store) {
	t.Helper()
	cli := startCluster(t)
	return fencetest.Context(t), cli, newStore(t, cli, name)
}

// startCluster starts a one-member etcd for the test and returns a client.
func startCluster(t testing.TB) *clientv3.Client {
	t.Helper()
	return cluster.New(t, 1).NewClient(t)
}

// floors is dump of s's floors: its fence prefix.
func floors(t testing.TB, cli *clientv3.Client, s *etcdfence.Store) map[string]string {
	t.Helper()
	return dump(t, cli, s.FencePrefix())
}
