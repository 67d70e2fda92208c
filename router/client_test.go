package router_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

func newClient(t *testing.T, cli fleet.FleetClient, cfg router.ClientConfig) *router.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := router.NewClient(ctx, cli, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// clientAgrees reports why c's view differs from the fleet's, "" if not.
func clientAgrees(c *router.Client, f *testFleet) string {
	ms := f.list()
	owners := map[string]*member{}
	for _, m := range ms {
		owners[m.id] = m
	}
	for i := range 4 * f.opts.Partitions {
		key := "agree-" + strconv.Itoa(i)
		got := c.Lookup(key)
		want := ms[0].node.Lookup(key)
		if got.Partition != want.Partition || got.Owner != want.Owner || got.Addr != want.Addr || got.Epoch != want.Epoch {
			return "key " + key + ": client " + got.Owner + "@" + got.Addr + " e" + strconv.FormatInt(got.Epoch, 10) +
				", fleet " + want.Owner + "@" + want.Addr + " e" + strconv.FormatInt(want.Epoch, 10)
		}
	}
	for p := range f.opts.Partitions {
		got, want := c.LookupPartition(p), ms[0].node.LookupPartition(p)
		if got.Partition != p || got.Owner != want.Owner || got.Addr != want.Addr || got.Epoch != want.Epoch {
			return "partition " + strconv.Itoa(p) + ": client " + got.Owner + " e" + strconv.FormatInt(got.Epoch, 10) +
				", fleet " + want.Owner + " e" + strconv.FormatInt(want.Epoch, 10)
		}
	}
	return ""
}

// waitClientAgrees waits until c and f's first node name the same owners.
// Either view may be the one that changes last (both follow etcd on their
// own watches), so it checks again when either changes.
func waitClientAgrees(t *testing.T, c *router.Client, f *testFleet) {
	t.Helper()
	waitUntil(t, 30*time.Second, "client view did not converge", func() (string, <-chan struct{}) {
		ch := either(t, c.Changed(), f.list()[0].node.Changed())
		return clientAgrees(c, f), ch
	})
}

// either returns a channel closed when one of chs is closed; its
// goroutines end then, or when t ends.
func either(t *testing.T, chs ...<-chan struct{}) <-chan struct{} {
	out, stop := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var once sync.Once
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(out) })
			case <-out:
			case <-stop:
			}
		}()
	}
	return out
}

func TestClientTracksFleet(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "track", fleetOptions{})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "track"})
	waitClientAgrees(t, c, f)
	assert.Equal(t, ring.PartitionOf("x", f.list()[0].node.Ring().Partitions()), c.Lookup("x").Partition)

	f.start("d")
	f.waitStable()
	waitClientAgrees(t, c, f)

	f.stopMember("a")
	f.waitStable()
	waitClientAgrees(t, c, f)

	// Requests go straight to the owner: no hop.
	for i := range 20 {
		key := "direct-" + strconv.Itoa(i)
		resp, err := getVia(context.Background(), c, key, "/k/"+key)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "ok", string(body))
	}
	assert.Zero(t, c.Stats().Retries)
	rev := router.Revision(c)
	assert.Positive(t, rev)
}

func TestClientLookupDoesNotAllocate(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "alloc", fleetOptions{})
	f.start("a")
	f.waitStable()
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "alloc"})
	waitClientAgrees(t, c, f)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = c.Lookup("some-key") }))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = c.LookupPartition(3) }))
	for _, p := range []int{-1, 16, 1 << 40} {
		assert.Equal(t, fleet.Route{Partition: p}, c.LookupPartition(p), "partition %d is out of range", p)
	}
}

func TestClientConfig(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ctx := context.Background()
	for _, cfg := range []router.ClientConfig{
		{},
		{Cluster: "x", Partitions: -1},
		{Cluster: "x", LoadFactor: 0.5},
		{Cluster: "x", Scheme: "gopher"},
		{Cluster: "x", Backoff: router.Backoff{MaxAttempts: -1}},
		{Cluster: "x\x00"},
		{Cluster: "x", SessionTTL: time.Second},
		{Cluster: "x", SessionTTL: -time.Second},
	} {
		_, err := router.NewClient(ctx, cli, cfg)
		assert.ErrorIs(t, err, router.ErrInvalidConfig, "%+v", cfg)
	}
	_, err := router.NewClient(ctx, nil, router.ClientConfig{Cluster: "x"})
	assert.ErrorIs(t, err, router.ErrNilArgument)
	var none *clientv3.Client
	_, err = router.NewClient(ctx, none, router.ClientConfig{Cluster: "x"})
	assert.ErrorIs(t, err, router.ErrNilArgument, "a nil *clientv3.Client")

	// A claim beyond the spec's partition count: the fleet's keys
	// contradict its spec.
	ff := fleettest.NewHandmade(t, cli, "mismatch")
	ff.Spec(64)
	_, err = cli.Put(ctx, keys.New("mismatch").Claim(100), "n1")
	require.NoError(t, err)
	_, err = router.NewClient(ctx, cli, router.ClientConfig{Cluster: "mismatch"})
	assert.ErrorIs(t, err, ring.ErrSpecMismatch)
	_, err = cli.Delete(ctx, keys.New("mismatch").Claim(100))
	require.NoError(t, err)
	c, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "mismatch", Partitions: 64})
	require.NoError(t, err)
	assert.Equal(t, ring.PartitionOf("k", 64), c.Lookup("k").Partition)
	c.Close()
	c.Close() // Close is idempotent
	_, err = getVia(ctx, c, "k", "/")
	assert.ErrorIs(t, err, router.ErrClosed)
}

type hit struct {
	idem string
	body string
}

// fakeNode is an HTTP server that records each request and answers with fn.
func fakeNode(t *testing.T, fn func(w http.ResponseWriter, r *http.Request)) (addr string, hits <-chan hit) {
	ch := make(chan hit, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- hit{idem: r.Header.Get(router.HeaderIdempotencyKey), body: string(b)}
		fn(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), ch
}

// crashingNode accepts connections and closes them without answering,
// signalling each one.
func crashingNode(t *testing.T) (addr string, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ch := make(chan struct{}, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			// Read the request head so that the client sees a reset or EOF
			// after sending, not a refused connection.
			buf := make([]byte, 1024)
			_, _ = conn.Read(buf)
			_ = conn.Close()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), ch
}

func TestClientRetries(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ff := fleettest.NewHandmade(t, cli, "fake")
	const P = 8
	ff.Spec(P)
	c := newClient(t, cli, router.ClientConfig{Cluster: "fake", Partitions: P,
		Backoff: router.Backoff{MaxAttempts: 4, Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	ctx := context.Background()

	okAddr, okHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") })
	ff.Member("ok", okAddr)

	t.Run("421 with hint", func(t *testing.T) {
		var hintEpoch int64 = 1 << 40
		wrongAddr, wrongHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
			_ = httpfence.WriteRefusal(w, router.WithHint(&httpfence.Refusal{Kind: httpfence.RefusalNotOwner},
				fleet.Route{Partition: 0, Owner: "ok", Addr: okAddr, Epoch: hintEpoch}))
		})
		ff.Member("wrong", wrongAddr)
		key := keyInPartition(c, 0)
		ff.Claim(0, "wrong")
		fleettest.WaitRoute(t, c, key, wrongAddr)

		before := c.Stats()
		resp, err := postVia(ctx, c, key, "/k/"+key, "text/plain", []byte("payload"))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "done", string(body))
		first, second := <-wrongHits, <-okHits
		assert.NotEmpty(t, first.idem)
		assert.Equal(t, first.idem, second.idem, "every attempt carries the same idempotency key")
		assert.Equal(t, "payload", first.body)
		assert.Equal(t, "payload", second.body, "the body is sent again")
		after := c.Stats()
		assert.Equal(t, before.Attempts+2, after.Attempts)
		assert.Equal(t, before.Retries+1, after.Retries)

		// The caller's idempotency key is kept.
		req, _ := http.NewRequest("PUT", "http://placeholder/k/"+key, strings.NewReader("x"))
		req.Header.Set(router.HeaderIdempotencyKey, "mine")
		resp, err = c.Do(ctx, key, req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "mine", (<-wrongHits).idem)
		assert.Equal(t, "mine", (<-okHits).idem)

		// A body that cannot be read twice is not retried.
		req, _ = http.NewRequest("PUT", "http://placeholder/k/"+key, io.NopCloser(strings.NewReader("x")))
		_, err = c.Do(ctx, key, req)
		assert.ErrorIs(t, err, router.ErrNotReplayable)
		assert.ErrorIs(t, err, ownership.ErrNotOwner)
		<-wrongHits
	})

	t.Run("connection errors until the claim moves", func(t *testing.T) {
		deadAddr, accepted := crashingNode(t)
		ff.Member("dead", deadAddr)
		key := keyInPartition(c, 1)
		ff.Claim(1, "dead")
		fleettest.WaitRoute(t, c, key, deadAddr)

		// Bounded attempts.
		_, err := getVia(ctx, c, key, "/k/"+key)
		require.ErrorIs(t, err, router.ErrRetriesExhausted)
		for range 4 {
			<-accepted
		}

		// The claim moves while the client retries: it follows.
		patient := newClient(t, cli, router.ClientConfig{Cluster: "fake",
			Backoff: router.Backoff{MaxAttempts: 1000, Initial: time.Millisecond, Max: 20 * time.Millisecond}})
		fleettest.WaitRoute(t, patient, key, deadAddr)
		done := make(chan error, 1)
		go func() {
			resp, err := getVia(ctx, patient, key, "/k/"+key)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-accepted
		ff.Claim(1, "ok")
		require.NoError(t, <-done)
		<-okHits
	})

	t.Run("application errors are answers", func(t *testing.T) {
		appAddr, appHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		})
		ff.Member("app", appAddr)
		key := keyInPartition(c, 2)
		ff.Claim(2, "app")
		fleettest.WaitRoute(t, c, key, appAddr)
		before := c.Stats().Attempts
		resp, err := getVia(ctx, c, key, "/k/"+key)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, before+1, c.Stats().Attempts)
		<-appHits
	})

	t.Run("context ends during backoff", func(t *testing.T) {
		slow := newClient(t, cli, router.ClientConfig{Cluster: "fake",
			Backoff: router.Backoff{Initial: time.Hour, Max: time.Hour}})
		deadAddr, accepted := crashingNode(t)
		ff.Member("dead2", deadAddr)
		key := keyInPartition(c, 3)
		ff.Claim(3, "dead2")
		fleettest.WaitRoute(t, slow, key, deadAddr)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := getVia(cctx, slow, key, "/k/"+key)
			done <- err
		}()
		<-accepted
		cancel()
		err := <-done
		assert.ErrorIs(t, err, context.Canceled)
	})

	t.Run("no owner", func(t *testing.T) {
		fleettest.NewHandmade(t, cli, "empty").Spec(P)
		empty := newClient(t, cli, router.ClientConfig{Cluster: "empty",
			Backoff: router.Backoff{MaxAttempts: 3, Initial: time.Millisecond, Max: time.Millisecond}})
		_, err := getVia(ctx, empty, "k", "/k/k")
		assert.ErrorIs(t, err, router.ErrRetriesExhausted)
		assert.ErrorIs(t, err, ownership.ErrNoOwner)
		_, err = getVia(ctx, empty, "k", "relative")
		assert.Error(t, err)
		_, err = empty.Do(ctx, "k", nil)
		assert.ErrorIs(t, err, router.ErrNilArgument)
	})
}

// keyInPartition returns a key of partition p.
func keyInPartition(c *router.Client, p int) string {
	for i := 0; ; i++ {
		k := "p" + strconv.Itoa(p) + "-" + strconv.Itoa(i)
		if c.Lookup(k).Partition == p {
			return k
		}
	}
}

// TestClientResync cuts the client off from etcd while the fleet changes and
// etcd compacts past what the client has seen, and shows that its watch,
// resumed from a compacted revision once it reconnects, makes it read the
// fleet again (a resync) and catch up.
func TestClientResync(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "resync", fleetOptions{})
	f.start("a")
	f.start("b")
	f.waitStable()
	cli, fp := etcd.NewFaultyClient(t)
	c := newClient(t, cli, router.ClientConfig{Cluster: "resync"})
	waitClientAgrees(t, c, f)
	// A change the client learns of only through its watch: once it
	// agrees, its watch runs (a resync needs a watch to fail).
	f.start("c")
	f.waitStable()
	waitClientAgrees(t, c, f)
	require.Zero(t, c.Stats().Resyncs, "starting the watch is no resync")

	fp.Blackhole()
	f.start("d")
	f.stopMember("a")
	f.waitStable()
	// Compact past what the client has seen: its watch cannot resume and it
	// must read the fleet again.
	resp, err := f.cli.Get(context.Background(), "compact")
	require.NoError(t, err)
	_, err = f.cli.Compact(context.Background(), resp.Header.Revision)
	require.NoError(t, err)
	fp.DropConnections()
	fp.Heal()
	waitClientAgrees(t, c, f)
	assert.Positive(t, c.Stats().Resyncs)
}

// A member key whose value cannot be decoded still counts in the ring, on
// the nodes and in the Client alike, so that both route the same way.
func TestClientRingMatchesNodesWithUndecodableMember(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "garbled", fleetOptions{})
	for _, id := range []string{"a", "b"} {
		f.start(id)
	}
	f.putMember(t, "z", "not json")
	f.waitStable("z")
	c := newClient(t, etcd.NewClient(t), router.ClientConfig{Cluster: "garbled"})
	waitClientAgrees(t, c, f)
}
