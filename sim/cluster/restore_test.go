package cluster

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A snapshot restored into the members, without and with
// --bump-revision: the data and the revision are the snapshot's, or the
// revision is raised by the bump, and the clients handed out before reach
// the restored cluster.
func TestRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcdutl and runs member processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	etcdutl, err := Etcdutl(ctx)
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Members, cfg.Processes = 3, true
	c := NewWithConfig(t, cfg)
	cli := c.NewClient(t)

	_, err = cli.Put(ctx, "k", "before")
	require.NoError(t, err)
	snap := filepath.Join(t.TempDir(), "snap.db")
	require.NoError(t, c.SaveSnapshot(ctx, snap))
	rev, err := SnapshotRevision(ctx, etcdutl, snap)
	require.NoError(t, err)
	for i := range 20 {
		_, err = cli.Put(ctx, "k", "after "+strconv.Itoa(i))
		require.NoError(t, err)
	}

	restore := func(flags ...string) (string, int64) {
		t.Helper()
		for i := range c.Size() {
			require.NoError(t, c.KillMember(i))
		}
		require.NoError(t, c.Restore(ctx, etcdutl, snap, flags...))
		resp, err := cli.Get(ctx, "k")
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		return string(resp.Kvs[0].Value), resp.Header.Revision
	}
	v, got := restore()
	assert.Equal(t, "before", v)
	assert.Equal(t, rev, got)
	v, got = restore("--bump-revision", "1000", "--mark-compacted")
	assert.Equal(t, "before", v)
	assert.Equal(t, rev+1000, got)
	require.ErrorIs(t, c.Restore(ctx, etcdutl, snap), ErrMemberRunning)
}
