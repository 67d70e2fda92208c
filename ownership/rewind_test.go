package ownership

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
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
