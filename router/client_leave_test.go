package router_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestClientReachesLeavingHolder: a node that leaves gracefully deletes
// its member key first and serves its partitions until their successors
// have prepared them. Meanwhile the Client still routes the leaving
// node's keys to its address (its claims are bound to the lease of the
// member key that is gone), and a request for one of them is answered by
// it; once the node has left, they route to the successor.
func TestClientReachesLeavingHolder(t *testing.T) {
	etcd := cluster.New(t, 1)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	preparing := make(chan int, 64)
	var armed atomic.Bool // before the test arms it, OnPrepare returns at once
	f := newFleet(t, etcd, "leaving", fleetOptions{WarmTimeout: time.Minute, Callbacks: ownership.Callbacks{
		OnPrepare: func(e ownership.Event) error {
			if !armed.Load() {
				return nil
			}
			preparing <- e.Partition
			select { // the successor prepares until the test lets it finish
			case <-release:
			case <-e.Context.Done():
			}
			return nil
		},
	}})
	a := f.start("a")
	f.start("b")
	f.waitStable()
	c := newClient(t, f.cli, router.ClientConfig{Cluster: "leaving"})
	waitClientAgrees(t, c, f)
	key := keyOwnedBy(t, a, "k")

	armed.Store(true)
	left := make(chan struct{})
	go func() {
		defer close(left)
		f.stopMember("a")
	}()
	<-preparing // b prepares a partition of a's, while a serves it
	resp, err := f.cli.Get(context.Background(), keys.New("leaving").Member("a"))
	require.NoError(t, err)
	require.Zero(t, resp.Count, "a's member key is deleted before its partitions move")
	gone := resp.Header.Revision
	waitUntil(t, 10*time.Second, "the client sees a's member key deleted", func() (string, <-chan struct{}) {
		ch := c.Changed()
		if router.Revision(c) < gone {
			return "not yet", ch
		}
		return "", nil
	})

	r := c.Lookup(key)
	assert.Equal(t, "a", r.Owner, "a's claim stands")
	assert.Equal(t, a.addr, r.Addr, "the client still reaches the leaving holder")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := getVia(ctx, c, key, "/k/"+key)
	require.NoError(t, err)
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	assert.Equal(t, "ok", string(body))

	unblock()
	<-left
	b := f.get("b")
	waitUntil(t, 10*time.Second, "the client routes a's key to b", func() (string, <-chan struct{}) {
		ch := c.Changed()
		if r := c.Lookup(key); r.Owner != "b" || r.Addr != b.addr || r.Epoch == 0 {
			return "route " + r.Owner + " " + r.Addr, ch
		}
		return "", nil
	})
}
