package memetcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/memetcd"
)

// A lease expires on virtual time: advancing the fake clock past its TTL
// deletes its keys, in one revision, without waiting.
func Example() {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	cli := srv.NewClient()
	ctx := context.Background()

	lease, err := cli.Grant(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	put, err := cli.Put(ctx, "/claims/7", "node-a", clientv3.WithLease(lease.ID))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claimed at revision", put.Header.Revision)

	fc.Advance(10 * time.Second) // a pause of 10s costs nothing
	get, err := cli.Get(ctx, "/claims/7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claims left:", len(get.Kvs), "at revision", get.Header.Revision)
	_, err = cli.KeepAliveOnce(ctx, lease.ID)
	fmt.Println(err)
	// Output:
	// claimed at revision 2
	// claims left: 0 at revision 3
	// etcdserver: requested lease not found
}

// A client cut off from etcd: its requests wait until their context ends,
// while other clients carry on.
func ExampleServer_Partition() {
	srv, err := memetcd.New(memetcd.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	a, b := srv.NewClient(), srv.NewClient()
	srv.Partition(a.ID())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = a.Put(ctx, "k", "from a")
	fmt.Println(err)
	_, err = b.Put(context.Background(), "k", "from b")
	fmt.Println(err)
	// Output:
	// context deadline exceeded
	// <nil>
}
