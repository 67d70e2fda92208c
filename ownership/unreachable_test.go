package ownership

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestJoinUnreachableEtcd: Join with etcd down and a 2s context returns
// when the context ends, with an error that wraps ErrUnavailable and the
// context's error and names the cause, after logging a warning with the
// cause while it waited.
func TestJoinUnreachableEtcd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()

	var logs bytes.Buffer
	cfg := testConfig(t, "down", "a", 16)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	n, err := Join(ctx, cli, cfg)
	took := time.Since(start)
	t.Logf("Join returned after %v: %v", took.Round(time.Millisecond), err)
	require.Nil(t, n)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "connection refused")
	assert.Contains(t, logs.String(), "etcd does not answer")
	assert.Contains(t, logs.String(), "connection refused")
	assert.Contains(t, logs.String(), "node=a")
}
