package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/testsupport"

	"github.com/tenure-go/tenure/sim/cluster"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperMain()
		return
	}
	testsupport.VerifyTestMain(m)
}

func put(ctx context.Context, cli *clientv3.Client, k, v string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := cli.Put(ctx, k, v)
	return err
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []cluster.Config{
		{Members: 2},
		{Members: 5},
		{Members: -1},
		{TickInterval: -time.Second},
		{TickInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond},
		{AuthTokenTTL: -time.Second},
		{AuthTokenTTL: 1500 * time.Millisecond},
	} {
		err := cfg.Validate()
		assert.ErrorIs(t, err, cluster.ErrInvalidConfig, "%+v", cfg)
		_, err = cluster.Start(context.Background(), cfg)
		assert.ErrorIs(t, err, cluster.ErrInvalidConfig, "%+v", cfg)
	}
	assert.NoError(t, cluster.DefaultConfig().Validate())
}

func TestSingleMemberAndCleanup(t *testing.T) {
	dir := t.TempDir()
	cfg := cluster.DefaultConfig()
	cfg.Dir = dir
	c, err := cluster.Start(context.Background(), cfg)
	require.NoError(t, err)
	cli, err := c.Client()
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, put(ctx, cli, "k", "v", 5*time.Second))
	resp, err := cli.Get(ctx, "k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "v", string(resp.Kvs[0].Value))
	eps := c.Endpoints()
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	_, err = c.Client()
	assert.ErrorIs(t, err, cluster.ErrClosed)
	// The client port is free again.
	u := eps[0][len("http://"):]
	ln, err := net.Listen("tcp", u)
	require.NoError(t, err, "port %s still in use after Close", u)
	require.NoError(t, ln.Close())
}

func TestTempDirRemoved(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.DefaultConfig())
	require.NoError(t, err)
	dir := c.DataDir()
	_, err = os.Stat(dir)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the cluster's temporary directory was not removed")
}

func TestStopLeaderElectsNewLeader(t *testing.T) {
	c := cluster.New(t, 3)
	cli := c.NewClient(t)
	ctx := context.Background()
	require.NoError(t, put(ctx, cli, "before", "1", 5*time.Second))

	old, err := c.StopLeader(ctx)
	require.NoError(t, err)
	assert.False(t, c.Running(old))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next, err := c.WaitLeader(wctx)
	require.NoError(t, err)
	assert.NotEqual(t, old, next)

	require.NoError(t, put(ctx, cli, "after", "2", 10*time.Second), "writes must succeed under the new leader")
	resp, err := cli.Get(ctx, "before")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)

	require.NoError(t, c.RestartMember(ctx, old))
	assert.True(t, c.Running(old))
	assert.ErrorIs(t, c.StopMember(7), cluster.ErrNoMember)
	require.NoError(t, c.StopMember(old))
	assert.ErrorIs(t, c.StopMember(old), cluster.ErrMemberStopped)
}

func TestBlackholeIsolatesOneClient(t *testing.T) {
	c := cluster.New(t, 3)
	healthy := c.NewClient(t)
	faulty, fp := c.NewFaultyClient(t)
	ctx := context.Background()
	require.NoError(t, put(ctx, faulty, "a", "1", 5*time.Second))

	fp.Blackhole()
	err := put(ctx, faulty, "a", "2", 500*time.Millisecond)
	require.Error(t, err, "a blackholed client's write must not succeed")
	require.NoError(t, put(ctx, healthy, "b", "1", 5*time.Second), "another client keeps working")

	fp.Heal()
	require.NoError(t, put(ctx, faulty, "c", "3", 10*time.Second), "a healed client works again")
	resp, err := healthy.Get(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, "3", string(resp.Kvs[0].Value))
	// The write that timed out had an unknown outcome: the proxy held its
	// bytes, as TCP would across a partition, and they may still land after
	// Heal, even after later writes. Either value is possible.
	resp, err = healthy.Get(ctx, "a")
	require.NoError(t, err)
	assert.Contains(t, []string{"1", "2"}, string(resp.Kvs[0].Value))
}

func TestDropConnectionsReconnects(t *testing.T) {
	c := cluster.New(t, 1)
	faulty, fp := c.NewFaultyClient(t)
	ctx := context.Background()
	require.NoError(t, put(ctx, faulty, "a", "1", 5*time.Second))
	fp.DropConnections()
	// The request in flight when the connection drops may fail with
	// Unavailable; the client then reconnects on its own.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := put(ctx, faulty, "a", "2", 5*time.Second)
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "client did not reconnect: %v", err)
	}
}

// echoServer accepts connections and echoes each line back.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(conn, conn); _ = conn.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestProxyFaults(t *testing.T) {
	p, err := cluster.NewProxy(echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	conn, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer conn.Close()
	r := bufio.NewReader(conn)
	roundTrip := func(msg string) (string, time.Duration) {
		start := time.Now()
		_, err := conn.Write([]byte(msg + "\n"))
		require.NoError(t, err)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		return line[:len(line)-1], time.Since(start)
	}
	got, _ := roundTrip("hello")
	assert.Equal(t, "hello", got)

	// Latency is a lower bound on the round trip (one delay each way).
	p.SetLatency(50 * time.Millisecond)
	got, rtt := roundTrip("slow")
	assert.Equal(t, "slow", got)
	assert.GreaterOrEqual(t, rtt, 100*time.Millisecond)
	p.SetLatency(0)

	// Blackhole holds bytes until Heal, then delivers them in order.
	p.Blackhole()
	assert.True(t, p.Blackholed())
	_, err = conn.Write([]byte("held\n"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = r.ReadString('\n')
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "blackholed bytes arrived: %v", err)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	p.Heal()
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "held\n", line)

	// DropConnections closes the client's connection.
	p.DropConnections()
	_, err = r.ReadString('\n')
	assert.Error(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
}
