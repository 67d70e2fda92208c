package ownership_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/cluster"
)

// A node joins the cluster, serves the partitions the ring gives it, and
// runs work for a key under the key's fencing token.
func ExampleJoin() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig()) // embedded etcd on loopback
	if err != nil {
		fmt.Println("start etcd:", err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println("etcd client:", err)
		return
	}

	cfg := ownership.DefaultConfig()
	cfg.Cluster = "example"
	cfg.NodeID = "node-a"
	cfg.Addr = "10.0.0.1:7000"
	cfg.Ring.Partitions = 8
	cfg.Session.TTL = 2 * time.Second
	node, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Alone in the cluster, node-a acquires every partition: it is ready
	// once it serves them all.
	for {
		changed := node.Changed()
		if node.Status().Ready {
			break
		}
		<-changed
	}

	route := node.Lookup("user:42")
	fmt.Println("owner:", route.Owner, route.Addr, "local:", route.Local)

	held, err := node.Hold("user:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Every write for the key carries held.Token; held.Context ends with
	// the tenure.
	fmt.Println("token scope is the key's partition:", held.Token.Scope == fence.PartitionScope(route.Partition))
	fmt.Println("token epoch is the claim's epoch:", held.Token.Epoch == route.Epoch)
	held.Release()

	if err := node.Close(ctx); err != nil {
		fmt.Println(err)
	}
	_, err = node.Hold("user:42")
	fmt.Println("after Close:", errors.Is(err, ownership.ErrClosed))
	// Output:
	// owner: node-a 10.0.0.1:7000 local: true
	// token scope is the key's partition: true
	// token epoch is the claim's epoch: true
	// after Close: true
}

// ChanCallbacks turns the callbacks into a channel of events.
func ExampleChanCallbacks() {
	cb, events, dropped := ownership.ChanCallbacks(16)
	cfg := ownership.DefaultConfig()
	cfg.Callbacks = cb // then Join with cfg

	// The node calls the callbacks; here, by hand.
	tok := fence.Token{Scope: fence.PartitionScope(7), Epoch: 42}
	cb.OnAcquired(ownership.Event{Kind: ownership.EventAcquired, Partition: 7, Token: tok, Context: context.Background()})
	cb.OnReleased(ownership.Event{Kind: ownership.EventReleased, Partition: 7, Token: tok, Reason: ownership.ErrMoved})
	for range 2 {
		switch e := <-events; e.Kind {
		case ownership.EventAcquired:
			fmt.Println(e.Kind, e.Partition, e.Token)
		case ownership.EventReleased:
			fmt.Println(e.Kind, e.Partition, e.Token, e.Reason)
		}
	}
	fmt.Println("dropped:", dropped())
	// Output:
	// acquired 7 p/7@42
	// released 7 p/7@42 ownership: partition moved
	// dropped: 0
}
