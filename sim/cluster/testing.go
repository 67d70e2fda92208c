package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// New starts a cluster of the given size (1 or 3) for a test or benchmark
// and closes it when the test ends. It fails the test if the cluster does not
// start.
func New(tb testing.TB, members int) *Cluster {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Members = members
	return NewWithConfig(tb, cfg)
}

// NewWithConfig starts a cluster with cfg for a test or benchmark and closes
// it when the test ends, even one that fails or panics. It fails the test if
// the cluster does not start.
func NewWithConfig(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	c, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("start etcd cluster: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// NewClient returns a client connected to every member, failing tb on error.
func (c *Cluster) NewClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := c.Client()
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	return cli
}

// NewClientAs is ClientAs, failing tb on error.
func (c *Cluster) NewClientAs(tb testing.TB, user, password string) *clientv3.Client {
	tb.Helper()
	cli, err := c.ClientAs(user, password)
	if err != nil {
		tb.Fatalf("etcd client as %s: %v", user, err)
	}
	return cli
}

// NewFaultyClient returns a client behind its own FaultPoint, failing tb on
// error.
func (c *Cluster) NewFaultyClient(tb testing.TB) (*clientv3.Client, *FaultPoint) {
	tb.Helper()
	cli, fp, err := c.FaultyClient()
	if err != nil {
		tb.Fatalf("etcd faulty client: %v", err)
	}
	return cli, fp
}

// UnreachableClient returns a client whose only endpoint is a loopback
// address where nothing listens (connections are refused), with the etcd
// client's own logging off, for tests of what tenure does when etcd cannot
// be reached. It is closed when the test ends.
func UnreachableClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}
