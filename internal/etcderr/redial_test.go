package etcderr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/etcderr"
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
