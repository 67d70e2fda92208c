package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// startEtcd starts an embedded etcd for an example.
func startEtcd() (*cluster.Cluster, *clientv3.Client) {
	c, err := cluster.Start(context.Background(), cluster.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := c.Client()
	if err != nil {
		log.Fatal(err)
	}
	return c, cli
}

// startStore starts an embedded etcd and a Store over it for an example:
// etcdfence.New(cli, cfg) with cfg naming the fleet, "demo".
func startStore() (*cluster.Cluster, *etcdfence.Store) {
	c, cli := startEtcd()
	cfg := etcdfence.DefaultConfig()
	cfg.Cluster = "demo" // the fleet's name, as in its nodes' ownership.Config
	store, err := etcdfence.New(cli, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return c, store
}

// A paused owner wakes up after a new owner has taken its partition: the
// store refuses its write.
func Example() {
	c, store := startStore()
	defer c.Close()
	ctx := context.Background()

	old := fence.Token{Scope: fence.PartitionScope(7), Epoch: 100}
	if err := store.Advance(ctx, old); err != nil {
		log.Fatal(err)
	}
	if _, err := store.Put(ctx, old, "orders/1", []byte("created")); err != nil {
		log.Fatal(err)
	}

	// The partition moves: the new owner raises the floor before any work.
	cur := fence.Token{Scope: fence.PartitionScope(7), Epoch: 250}
	if err := store.Advance(ctx, cur); err != nil {
		log.Fatal(err)
	}

	// The old owner resumes.
	_, err := store.Put(ctx, old, "orders/2", []byte("zombie"))
	fmt.Println(errors.Is(err, fence.ErrStale))
	var se *fence.StaleError
	if errors.As(err, &se) {
		fmt.Println(se.Scope, se.Presented, se.Current)
	}
	// Output:
	// true
	// p/7 100 250
}

// A write in the caller's own transaction, bound to the claim that issued
// the token.
func ExampleClaimGuard() {
	c, cli := startEtcd()
	defer c.Close()
	ctx := context.Background()

	claim := "/tenure/default/claims/3"
	resp, err := cli.Put(ctx, claim, "node-a")
	if err != nil {
		log.Fatal(err)
	}
	tok := fence.Token{Scope: fence.PartitionScope(3), Epoch: resp.Header.Revision}

	write := func(value string) error {
		guard, err := etcdfence.ClaimGuard(claim, tok)
		if err != nil {
			return err
		}
		r, err := cli.Txn(ctx).If(guard).
			Then(clientv3.OpPut("/app/balance", value)).
			Else(clientv3.OpGet(claim)).Commit()
		if err != nil {
			return err
		}
		if !r.Succeeded {
			stale := &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch}
			if kvs := r.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				stale.Current = kvs[0].CreateRevision // the claim that stands now
			}
			return stale
		}
		return nil
	}
	fmt.Println(write("10"))

	// The claim is lost (its lease expired) and nobody holds it now.
	if _, err := cli.Delete(ctx, claim); err != nil {
		log.Fatal(err)
	}
	err = write("20")
	fmt.Println(errors.Is(err, fence.ErrStale))
	// Output:
	// <nil>
	// true
}

// Many goroutines write through one Batcher; each write is fenced alone.
func ExampleBatcher() {
	c, store := startStore()
	defer c.Close()
	ctx := context.Background()
	b, err := etcdfence.NewBatcher(store, etcdfence.DefaultBatcherConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	tok := fence.Token{Scope: fence.PartitionScope(1), Epoch: 42}
	if err := store.Advance(ctx, tok); err != nil {
		log.Fatal(err)
	}
	errs := make(chan error)
	for i := range 8 {
		go func() {
			_, err := b.Put(ctx, tok, fmt.Sprintf("counter/%d", i), []byte("1"))
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			log.Fatal(err)
		}
	}
	_, err = b.Put(ctx, fence.Token{Scope: fence.PartitionScope(1), Epoch: 41}, "counter/0", []byte("stale"))
	fmt.Println(errors.Is(err, fence.ErrStale))
	// Output:
	// true
}
