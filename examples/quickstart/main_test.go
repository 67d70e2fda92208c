package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// TestQuickstart builds the program and runs it in a process of its own,
// as go run ./examples/quickstart does, and checks its exit status, its
// verdict and its report.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole quickstart (about 15s)")
	}
	bin := proctest.Build(t, "quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	t.Log("\n" + out.String() + stderr.String())
	require.NoError(t, err, "the quickstart exits 0 only with verdict OK")
	report := out.String()
	assert.Regexp(t, `\nverdict: OK \(`, report)

	cfg := DefaultConfig()
	check := regexp.MustCompile(`check: (\d+) increments acknowledged, counters sum to (\d+), 0 of \d+ counters differ`).FindStringSubmatch(report)
	require.NotNil(t, check, "the check line")
	acked, _ := strconv.Atoi(check[1])
	assert.GreaterOrEqual(t, acked, cfg.Increments)
	assert.Equal(t, check[1], check[2], "every acknowledged increment counted once")
	store := regexp.MustCompile(`store: (\d+) stale writes rejected, 0 accepted`).FindStringSubmatch(report)
	require.NotNil(t, store, "no stale write accepted")
	rejected, _ := strconv.Atoi(store[1])
	assert.GreaterOrEqual(t, rejected, cfg.Paused, "the killed node's paused writes are rejected")
	forwarded := regexp.MustCompile(`(\d+) forwarded one hop`).FindStringSubmatch(report)
	require.NotNil(t, forwarded)
	assert.NotEqual(t, "0", forwarded[1])
	for _, want := range []string{"kill node-2", "join node-5", "leave node-3"} {
		assert.Regexp(t, regexp.QuoteMeta(want)+`[^\n]*\d+ partitions`, report, "the %s moved partitions", want)
	}
	for _, want := range []string{"nodes:", "killed", "left", "ownership moves:", "check:"} {
		assert.Contains(t, report, want)
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
