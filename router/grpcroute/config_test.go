package grpcroute_test

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Bad arguments and configs get typed errors, never a panic.
func TestConfigErrors(t *testing.T) {
	var node *ownership.Node
	_, err := grpcroute.NewServer(node, grpcroute.ServerConfig{})
	assert.ErrorIs(t, err, grpcroute.ErrNilArgument, "typed nil node")
	_, err = grpcroute.NewServer(nil, grpcroute.ServerConfig{})
	assert.ErrorIs(t, err, grpcroute.ErrNilArgument)
	_, err = grpcroute.NewClient(nil, grpcroute.ClientConfig{})
	assert.ErrorIs(t, err, grpcroute.ErrNilArgument)

	assert.ErrorIs(t, grpcroute.ServerConfig{HandoffWait: -1}.Validate(), grpcroute.ErrInvalidConfig)
	var log hclog.Logger = (*nilLogger)(nil)
	err = grpcroute.ServerConfig{Logger: log}.Validate()
	assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig)
	assert.ErrorIs(t, err, grpcroute.ErrNilArgument)
	err = grpcroute.ClientConfig{Backoff: router.Backoff{MaxAttempts: -1}}.Validate()
	assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig)
	assert.ErrorIs(t, err, router.ErrInvalidBackoff)

	for _, ttl := range []time.Duration{time.Second, -time.Second} {
		err = grpcroute.ClientConfig{SessionTTL: ttl}.Validate()
		assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig, "session TTL %v", ttl)
		assert.ErrorContains(t, err, "must be at least 2s")
	}
	_, err = grpcroute.NewClient(cluster.UnreachableClient(t), grpcroute.ClientConfig{SessionTTL: time.Second})
	assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig)
	require.NoError(t, grpcroute.ClientConfig{SessionTTL: 2 * time.Second, AttemptTimeout: -1}.Validate())

	require.NoError(t, grpcroute.DefaultServerConfig().Validate())
	require.NoError(t, grpcroute.DefaultClientConfig().Validate())
	// The attempt bound's defaults are router.Client's: half the nodes'
	// default TTL.
	assert.Equal(t, election.DefaultTTL, grpcroute.DefaultClientConfig().SessionTTL)
	assert.Equal(t, election.DefaultTTL/2, grpcroute.DefaultClientConfig().AttemptTimeout)
	assert.Equal(t, router.DefaultHandoffWait, grpcroute.DefaultServerConfig().HandoffWait)
	assert.Equal(t, "tenure:///counter", grpcroute.Target("counter"))
	assert.Equal(t, "tenure:///?prefix=%2Fx%2Fy%2F", grpcroute.TargetPrefix("/x/y/"))
}

// nilLogger is a logger type whose nil pointer is a typed nil.
type nilLogger struct{ hclog.Logger }
