package ownership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// A store whose floors are above etcd's revision, as after etcd was
// restored from a snapshot taken before the floors were raised: the node
// names the rewind (a *RewindError in its Status, one log line, the
// metrics), admits no work for those partitions while it retries, and
// serves them once etcd's revisions pass the floors.
func TestRewindReported(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cli.Get(ctx, "rewind/any")
	require.NoError(t, err)
	floor := resp.Header.Revision + 40
	f, _ := openSQLiteFencer(t)
	for _, p := range []int{1, 2} {
		require.NoError(t, f.Advance(ctx, fence.Token{Scope: fence.PartitionScope(p), Epoch: floor}))
	}

	reg := prometheus.NewPedanticRegistry()
	buf := &testsupport.Buffer{}
	cfg := testConfig(t, "rewind", "a", 4)
	cfg.Metrics = reg
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfg.Fencers = []fence.Fencer{f}
	a := join(t, cli, cfg)

	// Every retry is counted; the log says it once.
	for metricOf(t, reg, "tenure_fence_rewinds_total", "a") < 6 {
		select {
		case <-buf.Written():
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	st := a.Status()
	require.Len(t, st.Rewound, 2)
	for i, p := range []int{1, 2} {
		rw := st.Rewound[i]
		assert.Equal(t, p, rw.Partition)
		assert.Equal(t, fence.PartitionScope(p), rw.Scope)
		assert.Equal(t, floor, rw.Floor)
		assert.Less(t, rw.Epoch, floor)
		assert.Less(t, rw.Revision, floor)
		assert.GreaterOrEqual(t, rw.Revision, rw.Epoch)
		assert.True(t, errors.Is(&rw, ErrRewound))
		assert.True(t, errors.Is(&rw, fence.ErrStale))
		assert.Contains(t, rw.Error(), "etcd revisions went backwards (restored from a snapshot?)")
	}
	require.Equal(t, []int{0, 3}, a.Owned())
	_, err = a.HoldPartition(1)
	assert.ErrorIs(t, err, ErrNotOwner)
	assert.Equal(t, 2.0, metricOf(t, reg, "tenure_partitions_rewound", "a"))

	rec := httptest.NewRecorder()
	a.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz/readyz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "etcd revisions went backwards (restored from a snapshot?)")

	lines := logLines(t, buf)
	var said []map[string]any
	for _, l := range lines {
		m, _ := l["@message"].(string)
		if strings.HasPrefix(m, "etcd revisions went backwards") {
			said = append(said, l)
		}
		assert.False(t, strings.HasPrefix(m, "fence rejection"), "a rewind is not a fence rejection: %v", l)
	}
	require.Len(t, said, 1, buf.String())
	assert.Equal(t, "1-2", said[0]["partitions"])
	assert.Equal(t, float64(floor), said[0]["floor"])

	// etcd's revisions pass the floors: the node serves every partition.
	for range 45 {
		_, err := cli.Put(ctx, "rewind/climb", "x")
		require.NoError(t, err)
	}
	waitStable(t, 30*time.Second, a)
	assert.Empty(t, a.Status().Rewound)
	assert.Equal(t, 0.0, metricOf(t, reg, "tenure_partitions_rewound", "a"))
	waitLogged(t, buf, 30*time.Second, func(lines []map[string]any) error {
		for _, l := range lines {
			if m, _ := l["@message"].(string); strings.HasPrefix(m, "rewind over") {
				return nil
			}
		}
		return errors.New(`no line "rewind over"`)
	})
}

// A member key bound to the lease of an earlier session of the node, as
// etcd restored from a snapshot taken then holds it, is the node's own: its
// rejoin takes it over at once instead of waiting for that lease to
// expire.
func TestRejoinTakesOverAnEarlierSessionsKey(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buf := &testsupport.Buffer{}
	cfg := testConfig(t, "rejoin-own", "a", 4)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	a := join(t, cli, cfg)
	waitStable(t, 20*time.Second, a)
	lease := func() clientv3.LeaseID {
		l, err := strconv.ParseInt(a.Status().Lease, 16, 64)
		require.NoError(t, err)
		return clientv3.LeaseID(l)
	}
	first := lease()
	logged := func(msg string, n int) func([]map[string]any) error {
		return func(lines []map[string]any) error {
			got := 0
			for _, l := range lines {
				if m, _ := l["@message"].(string); strings.HasPrefix(m, msg) {
					got++
				}
			}
			if got < n {
				return fmt.Errorf("%d lines %q, want %d", got, msg, n)
			}
			return nil
		}
	}

	// The first session ends (its lease revoked); a rejoins under another.
	_, err := cli.Revoke(ctx, first)
	require.NoError(t, err)
	waitLogged(t, buf, 30*time.Second, logged("rejoined", 1))
	waitStable(t, 20*time.Second, a)
	require.NotEqual(t, first, lease())

	// The first lease is back, holding a's member key, as after a restore.
	// a revokes the lease of its ended session in the background, best
	// effort: a revoke still on its way may end the lease granted again,
	// so grant it again until the key bound to it stands.
	for attempt := 0; ; attempt++ {
		_, err = pb.NewLeaseClient(cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: int64(first), TTL: 600})
		require.NoError(t, err)
		_, err = cli.Put(ctx, keys.For("rejoin-own", "").Member("a"), `{"id":"a","addr":"a.test:7000"}`, clientv3.WithLease(first))
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) || attempt == 10 {
			break
		}
	}
	require.NoError(t, err)
	waitLogged(t, buf, 30*time.Second, logged("rejoin: the member key is held by an earlier session of this node", 1))
	waitLogged(t, buf, 30*time.Second, logged("rejoined", 2))
	waitStable(t, 20*time.Second, a)
	resp, err := cli.Get(ctx, keys.For("rejoin-own", "").Member("a"))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, int64(lease()), resp.Kvs[0].Lease)
	assert.NotContains(t, buf.String(), "the node ID is taken by another process")
}
