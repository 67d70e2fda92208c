package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestQuickstart runs the program as go run ./examples/quickstart does and
// checks its verdict and report.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole quickstart (about 15s)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, DefaultConfig(), &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.True(t, rep.OK(), "verdict")
	assert.Contains(t, out.String(), "\nverdict: OK")
	assert.GreaterOrEqual(t, rep.Acked, int64(DefaultConfig().Increments))
	assert.Equal(t, rep.Acked, rep.Counted)
	assert.Zero(t, rep.Mismatched)
	assert.Zero(t, rep.StaleAccepted)
	assert.GreaterOrEqual(t, rep.StaleRejected, int64(DefaultConfig().Paused), "the killed node's paused writes are rejected")
	assert.Positive(t, rep.Forwarded)
	require.Len(t, rep.Events, 3)
	for _, e := range rep.Events {
		assert.Positive(t, e.Partitions, e.What)
	}
	for _, want := range []string{"nodes:", "killed", "left", "ownership moves:", "check:"} {
		assert.Contains(t, out.String(), want)
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	for name, mod := range map[string]func(*Config){
		"two nodes":        func(c *Config) { c.Nodes = 2 },
		"no partitions":    func(c *Config) { c.Partitions = 0 },
		"no keys":          func(c *Config) { c.Keys = 0 },
		"no workers":       func(c *Config) { c.Workers = -1 },
		"no increments":    func(c *Config) { c.Increments = 0 },
		"negative rate":    func(c *Config) { c.Rate = -1 },
		"ttl below etcd's": func(c *Config) { c.TTL = time.Second },
	} {
		cfg := DefaultConfig()
		mod(&cfg)
		err := cfg.Validate()
		require.Error(t, err, name)
		_, runErr := Run(context.Background(), cfg, &bytes.Buffer{})
		assert.Equal(t, err, runErr, name)
	}
}
