package router_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// NewClient on an etcd client that is closed, before or while it waits for
// the fleet's spec, returns at once with ErrClientClosed instead of waiting
// out its context.
func TestNewClientClosedEtcd(t *testing.T) {
	etcd := cluster.New(t, 1)

	t.Run("closed before", func(t *testing.T) {
		cli := etcd.NewClient(t)
		require.NoError(t, cli.Close())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "closed"})
		require.ErrorIs(t, err, ownership.ErrClientClosed)
		assert.NoError(t, ctx.Err(), "NewClient returned before its context ended")
	})

	t.Run("closed while waiting for the spec", func(t *testing.T) {
		cli := etcd.NewClient(t)
		waiting := make(chan struct{})
		var once sync.Once
		log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: writerFunc(func(p []byte) {
			if strings.Contains(string(p), "has no spec yet") {
				once.Do(func() { close(waiting) })
			}
		})})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "nospec", Logger: log})
			done <- err
		}()
		<-waiting
		require.NoError(t, cli.Close())
		err := <-done
		require.ErrorIs(t, err, ownership.ErrClientClosed)
		assert.NoError(t, ctx.Err(), "NewClient returned before its context ended")
	})
}

type writerFunc func(p []byte)

func (w writerFunc) Write(p []byte) (int, error) { w(p); return len(p), nil }

// failingWatches is a real etcd client whose watches of the spec key fail
// at once (the channel closes without a response), as they do when etcd
// refuses them; it counts them.
type failingWatches struct {
	*clientv3.Client
	watches atomic.Int64
	fail    atomic.Bool
}

func (f *failingWatches) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	f.watches.Add(1)
	if !f.fail.Load() {
		return f.Client.Watch(ctx, key, opts...)
	}
	ch := make(chan clientv3.WatchResponse)
	close(ch)
	return ch
}

// A watch of the spec that fails is started again after a delay that grows,
// not at once: while the clock does not move, NewClient starts no watch.
func TestNewClientSpecWatchBacksOff(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := &failingWatches{Client: etcd.NewClient(t)}
	cli.fail.Store(true)
	clk := clockwork.NewFakeClock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "flaky", Clock: clk})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	for i := int64(1); i <= 4; i++ {
		require.NoError(t, clk.BlockUntilContext(ctx, 1), "NewClient waits on the clock after failed watch %d", i)
		assert.Equal(t, i, cli.watches.Load(), "no watch is started while the delay runs")
		clk.Advance(time.Minute)
	}
	// Watches work again and the spec appears: NewClient returns.
	cli.fail.Store(false)
	fleettest.NewHandmade(t, cli.Client, "flaky").Spec(8)
	clk.Advance(time.Minute)
	require.NoError(t, <-done)
}

// Stats count only the attempts sent: a call that found no node to send to
// sent nothing and retried nothing.
func TestClientStatsCountSentAttempts(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	fleettest.NewHandmade(t, cli, "unsent").Spec(8)
	c := newClient(t, cli, router.ClientConfig{Cluster: "unsent",
		Backoff: router.Backoff{MaxAttempts: 4, Initial: time.Millisecond, Max: time.Millisecond}})
	_, err := getVia(context.Background(), c, "k", "/k/k")
	require.ErrorIs(t, err, router.ErrRetriesExhausted)
	assert.Equal(t, router.ClientStats{Failed: 1}, c.Stats())
}

// With every node's session lost, a caller is told the partition is
// unavailable, not that it asked the wrong owner; errors.Is still finds
// ErrNoOwner.
func TestClientNoSessionAnywhereIsUnavailable(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "nosession", fleetOptions{Faulty: true})
	for _, id := range []string{"a", "b"} {
		f.start(id)
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "nosession",
		Backoff: router.Backoff{MaxAttempts: 3, Initial: time.Millisecond, Max: time.Millisecond}})
	waitClientAgrees(t, c, f)
	for _, m := range f.list() {
		m.fp.Blackhole() // every node loses etcd: its session ends, its lease expires
	}
	const key = "k"
	waitUntil(t, 30*time.Second, "the nodes' leases did not expire", func() (string, <-chan struct{}) {
		ch := c.Changed()
		if r := c.Lookup(key); r.Owner != "" {
			return "the client still routes to " + r.Owner, ch
		}
		return "", nil
	})
	_, err := getVia(context.Background(), c, key, "/k/"+key)
	require.Error(t, err)
	t.Log(err)
	assert.ErrorIs(t, err, router.ErrRetriesExhausted)
	assert.ErrorIs(t, err, ownership.ErrNoOwner)
	assert.Contains(t, err.Error(), "unavailable")
	assert.NotContains(t, err.Error(), "not the owner")
	assert.Zero(t, c.Stats().Attempts, "nothing was sent")
	for _, m := range f.list() {
		m.fp.Heal()
	}
}

// A node that answers that its session is lost is reported so, whatever
// the hint: the caller reads the cause.
func TestClientSessionLostRefusalWording(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ff := fleettest.NewHandmade(t, cli, "lostwording")
	ff.Spec(8)
	c := newClient(t, cli, router.ClientConfig{Cluster: "lostwording",
		Backoff: router.Backoff{MaxAttempts: 2, Initial: time.Millisecond, Max: time.Millisecond}})
	addr, _ := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		_ = httpfence.WriteRefusal(w, router.WithHint(&httpfence.Refusal{Kind: httpfence.RefusalSessionLost}, fleet.Route{Partition: 0}))
	})
	ff.Member("n", addr)
	key := keyInPartition(c, 0)
	ff.Claim(0, "n")
	fleettest.WaitRoute(t, c, key, addr)
	_, err := getVia(context.Background(), c, key, "/k/"+key)
	require.ErrorIs(t, err, router.ErrRetriesExhausted)
	t.Log(err)
	assert.Contains(t, err.Error(), "session-lost")
	assert.Equal(t, int64(2), c.Stats().Attempts)
	assert.Equal(t, int64(1), c.Stats().Retries)
	var ref *httpfence.Refusal
	require.True(t, errors.As(err, &ref))
	assert.Equal(t, httpfence.RefusalSessionLost, ref.Kind)
}
