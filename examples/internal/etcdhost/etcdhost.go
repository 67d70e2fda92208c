// Package etcdhost serves a single-member etcd inside an example's process
// (its --embedded-etcd flag) and makes the examples' etcd clients: a
// convenience for trying an example on one machine. Production runs a real
// etcd cluster and passes --etcd.
package etcdhost

import (
	"context"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds the start of an embedded etcd.
const startTimeout = time.Minute

// Start serves a single-member etcd named name with its data in dir, its
// clients on listen and its (unused) peer port on peer, both host:port.
func Start(ctx context.Context, name, dir, listen, peer string) (*embed.Etcd, error) {
	cu := url.URL{Scheme: "http", Host: listen}
	pu := url.URL{Scheme: "http", Host: peer}
	ec := embed.NewConfig()
	ec.Name = name
	ec.Dir = dir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ListenMetricsUrls = nil
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd: not ready after %v", startTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// NewClient returns an etcd client for endpoints. The client connects
// lazily: an etcd that is not up yet delays the first session, it does not
// stop the process.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return cli, nil
}
