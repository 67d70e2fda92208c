package memetcd_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// These tests run tenure's real election and ownership code against
// memetcd on a fake clock that a driver goroutine advances, so that a
// failover that takes a lease TTL of 10s in virtual time takes a fraction
// of a second of real time.

// virtualStep and realStep set the speed of virtual time: 20ms of virtual
// time per real millisecond, at most.
const (
	virtualStep = 20 * time.Millisecond
	realStep    = time.Millisecond
	ttl         = 10 * time.Second
)

// driveClock advances fc by virtualStep every realStep until the test ends.
func driveClock(t *testing.T, fc *clockwork.FakeClock) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(realStep):
				fc.Advance(virtualStep)
			}
		}
	}()
	// Registered first, so it runs last: cleanups that wait on the clock
	// (closing nodes, sessions) still see it move.
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// waitFor polls cond (real time) until it holds, failing after a real
// minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestElectionFailoverOnVirtualTime(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	driveClock(t, fc)
	ctx := testCtx(t)

	candidate := func(id string) (*memetcd.Client, *election.Session, *election.Election) {
		cli := srv.NewClient()
		s, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: ttl, Clock: fc})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: "sim", Name: "boss", ID: id})
		require.NoError(t, err)
		return cli, s, e
	}
	cliA, _, ea := candidate("a")
	_, _, eb := candidate("b")

	termA, err := ea.Campaign(ctx)
	require.NoError(t, err)
	var aEnded atomic.Pointer[time.Time]
	go func() {
		<-termA.Done()
		now := fc.Now()
		aEnded.Store(&now)
	}()
	won := make(chan *election.Term, 1)
	go func() {
		tb, err := eb.Campaign(ctx)
		assert.NoError(t, err)
		won <- tb
	}()
	leader, err := eb.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", leader.ID)

	// Kill a: its client can no longer reach etcd.
	startReal, startVirtual := time.Now(), fc.Now()
	srv.Partition(cliA.ID())
	var termB *election.Term
	select {
	case termB = <-won:
	case <-time.After(time.Minute):
		t.Fatal("b never won")
	}
	require.NotNil(t, termB)
	wonAt := fc.Now()
	virtual, real := wonAt.Sub(startVirtual), time.Since(startReal)
	t.Logf("failover after %v of virtual time, %v of real time", virtual, real.Round(time.Millisecond))

	assert.Greater(t, termB.Token().Epoch, termA.Token().Epoch, "epochs increase across terms")
	ended := aEnded.Load()
	require.NotNil(t, ended, "a's term ended before b won")
	assert.True(t, ended.Before(wonAt), "a stopped at %v, b won at %v", ended, wonAt)
	assert.LessOrEqual(t, virtual, ttl+3*time.Second)
	assert.GreaterOrEqual(t, virtual, ttl-ttl/3-time.Second, "not before a's lease could expire")
	srv.Heal(cliA.ID())
	require.NoError(t, termB.Resign(ctx))
}

func TestOwnershipFailoverOnVirtualTime(t *testing.T) {
	const partitions = 16
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	driveClock(t, fc)
	ctx := testCtx(t)

	// Tenures as the callbacks report them, to check that no partition is
	// ever served by two nodes at once (in callback order).
	var mu sync.Mutex
	serving := map[int]string{}
	tokens := map[string][]fence.Token{} // every token each node acquired
	var overlaps []string
	join := func(id string) (*memetcd.Client, *ownership.Node, *etcdfence.Store) {
		cli := srv.NewClient()
		store, err := etcdfence.New(cli, etcdfence.Config{Cluster: "sim"})
		require.NoError(t, err)
		cfg := ownership.DefaultConfig()
		cfg.Fencers = []fence.Fencer{store}
		cfg.Cluster = "sim"
		cfg.NodeID = id
		cfg.Ring.Partitions = partitions
		cfg.Session.TTL = ttl
		cfg.Clock = fc
		cfg.Callbacks = ownership.Callbacks{
			OnAcquired: func(e ownership.Event) {
				p, tok := e.Partition, e.Token
				mu.Lock()
				defer mu.Unlock()
				tokens[id] = append(tokens[id], tok)
				if other, ok := serving[p]; ok {
					overlaps = append(overlaps, fmt.Sprintf("partition %d: %s acquired while %s serves", p, id, other))
				}
				serving[p] = id
			},
			OnReleased: func(e ownership.Event) {
				p := e.Partition
				mu.Lock()
				defer mu.Unlock()
				if serving[p] == id {
					delete(serving, p)
				}
			},
		}
		n, err := ownership.Join(ctx, cli, cfg)
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = n.Close(cctx)
		})
		return cli, n, store
	}
	_, na, storeA := join("a")
	_, nb, _ := join("b")
	cliC, nc, storeC := join("c")
	nodes := []*ownership.Node{na, nb, nc}

	owned := func(ns ...*ownership.Node) []int {
		var all []int
		for _, n := range ns {
			all = append(all, n.Owned()...)
		}
		slices.Sort(all)
		return all
	}
	every := make([]int, partitions)
	for i := range every {
		every[i] = i
	}
	waitFor(t, "all partitions claimed by 3 nodes", func() bool {
		for _, n := range nodes {
			if len(n.Owned()) == 0 {
				return false
			}
		}
		return slices.Equal(owned(nodes...), every)
	})
	lost := nc.Owned()
	t.Logf("c serves %v", lost)

	// Kill c: it can no longer reach etcd. Its partitions move to a and b
	// once its lease expires in memetcd, on virtual time.
	startReal, startVirtual := time.Now(), fc.Now()
	srv.Partition(cliC.ID())
	waitFor(t, "c's partitions to fail over", func() bool {
		return slices.Equal(owned(na, nb), every)
	})
	virtual, real := fc.Now().Sub(startVirtual), time.Since(startReal)
	t.Logf("failover of %d partitions after %v of virtual time, %v of real time", len(lost), virtual, real.Round(time.Millisecond))
	assert.Empty(t, nc.Owned(), "c stopped serving")
	assert.LessOrEqual(t, virtual, ttl+3*time.Second)
	assert.GreaterOrEqual(t, virtual, ttl-ttl/3-time.Second, "not before c's lease could expire")

	mu.Lock()
	assert.Empty(t, overlaps)
	zombie := slices.Clone(tokens["c"])
	mu.Unlock()

	// c comes back (a paused process resuming) and writes under the tokens
	// it held: every write is refused, since the new owners raised the
	// floors before serving.
	srv.Heal(cliC.ID())
	require.NotEmpty(t, zombie)
	for _, tok := range zombie {
		_, err := storeC.Put(ctx, tok, fmt.Sprintf("zombie/%s", tok.Scope), []byte("stale"))
		assert.ErrorIs(t, err, fence.ErrStale, "token %v", tok)
	}
	// The current owners write. c is back, so partitions may be moving
	// from a to c meanwhile: a writes under the tenures it can still hold.
	written := 0
	for p := range partitions {
		held, err := na.HoldPartition(p)
		if err != nil {
			continue
		}
		_, err = storeA.Put(ctx, held.Token, fmt.Sprintf("live/%d", p), []byte("ok"))
		held.Release()
		assert.NoError(t, err)
		written++
	}
	assert.Positive(t, written, "a held none of its partitions")
}
