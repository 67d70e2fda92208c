package main

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/tenure-go/tenure/examples/internal/etcdhost"
)

// startEtcd serves the single-member etcd of --embedded-etcd.
func startEtcd(ctx context.Context, dir, listen, peer string) (*embed.Etcd, error) {
	return etcdhost.Start(ctx, "counter", dir, listen, peer)
}

// newClient returns an etcd client for endpoints; it connects lazily.
func newClient(endpoints []string) (*clientv3.Client, error) { return etcdhost.NewClient(endpoints) }
