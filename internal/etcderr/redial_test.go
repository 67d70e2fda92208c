package etcderr_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestRedial: a *clientv3.Client's connection is asked to reconnect, even
// with nothing listening at its endpoint; anything else is left alone.
func TestRedial(t *testing.T) {
	assert.False(t, etcderr.Redial(nil))
	assert.False(t, etcderr.Redial(struct{}{}))
	var lease struct{ clientv3.Lease }
	assert.False(t, etcderr.Redial(lease), "a wrapped Lease has no connection to ask")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer func() { _ = cli.Close() }()
	assert.True(t, etcderr.Redial(cli))
}

// TestWaitDown: WaitDown reports a connection that is down (nothing
// listens at its endpoint) at once, waits while it is up until ctx ends,
// reports it once its etcd member stops, and reports false for a closed
// client and for anything without a connection.
func TestWaitDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	assert.False(t, etcderr.WaitDown(ctx, nil))
	assert.False(t, etcderr.WaitDown(ctx, struct{}{}))

	down, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer func() { _ = down.Close() }()
	gctx, gcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = down.Get(gctx, "k") // the first call starts the connection
	gcancel()
	require.Error(t, err)
	assert.True(t, etcderr.WaitDown(ctx, down))

	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	_, err = cli.Get(ctx, "k")
	require.NoError(t, err)
	ended, end := context.WithCancel(ctx)
	end()
	assert.False(t, etcderr.WaitDown(ended, cli), "up, and ctx ended")
	require.NoError(t, c.StopMember(0))
	assert.True(t, etcderr.WaitDown(ctx, cli), "its member stopped")
	require.NoError(t, cli.Close())
	assert.False(t, etcderr.WaitDown(ctx, cli), "closed")
}
