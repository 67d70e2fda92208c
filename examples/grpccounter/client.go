package main

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router/grpcroute"
)

// dial returns a Counter client of the fleet cluster, whose nodes hold
// leases of TTL ttl, that sends each call to the owner of its key, and the
// function that closes it. An attempt that has no answer within ttl/2 (an
// owner paused past its lease) is sent again to the next owner. This is what a
// caller of the service copies (with transport credentials of its own).
//
// The nodes take a unary call's key from its request with the same
// requestKey, so the key is not sent again as metadata; Get only reads, so
// its calls go without an idempotency key (an attempt run twice does no
// harm). Add keeps its idempotency key: the node applies each one once.
func dial(cli *clientv3.Client, cluster string, ttl time.Duration) (counterpb.CounterClient, func(), error) {
	c, err := grpcroute.NewClient(cli, grpcroute.ClientConfig{
		SessionTTL:       ttl,
		Key:              requestKey,
		OmitKeyMetadata:  true,
		NoIdempotencyKey: func(method string) bool { return method == counterpb.Counter_Get_FullMethodName },
	})
	if err != nil {
		return nil, nil, err
	}
	conn, err := c.NewConn(grpcroute.Target(cluster), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return counterpb.NewCounterClient(conn), func() {
		_ = conn.Close()
		c.Close()
	}, nil
}
