package ownership

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		cfg := DefaultConfig()
		cfg.Cluster, cfg.NodeID = "c", "n1"
		return cfg
	}
	require.NoError(t, good().Validate())
	tests := []struct {
		name  string
		edit  func(*Config)
		wants []error
	}{
		{"empty node ID", func(c *Config) { c.NodeID = "" }, []error{ring.ErrInvalidNodeID}},
		{"node ID with NUL", func(c *Config) { c.NodeID = "a\x00b" }, []error{ring.ErrInvalidNodeID}},
		{"node ID with slash", func(c *Config) { c.NodeID = "a/b" }, []error{ring.ErrInvalidNodeID}},
		{"node ID with space", func(c *Config) { c.NodeID = "a b" }, []error{ring.ErrInvalidNodeID}},
		{"node ID too long", func(c *Config) { c.NodeID = strings.Repeat("x", ring.MaxNodeIDLen+1) }, []error{ring.ErrInvalidNodeID}},
		{"zero partitions", func(c *Config) { c.Ring.Partitions = 0 }, []error{ring.ErrInvalidPartitions}},
		{"negative partitions", func(c *Config) { c.Ring.Partitions = -4 }, []error{ring.ErrInvalidPartitions}},
		{"too many partitions", func(c *Config) { c.Ring.Partitions = ring.MaxPartitions + 1 }, []error{ring.ErrInvalidPartitions}},
		{"load below 1", func(c *Config) { c.Ring.LoadFactor = 0.99 }, []error{ring.ErrInvalidLoadFactor}},
		{"zero load", func(c *Config) { c.Ring.LoadFactor = 0 }, []error{ring.ErrInvalidLoadFactor}},
		{"NaN load", func(c *Config) { c.Ring.LoadFactor = math.NaN() }, []error{ring.ErrInvalidLoadFactor}},
		{"no cluster", func(c *Config) { c.Cluster = "" }, nil},
		{"cluster with slash", func(c *Config) { c.Cluster = "a/b" }, nil},
		{"cluster with NUL", func(c *Config) { c.Cluster = "a\x00" }, nil},
		{"prefix with NUL", func(c *Config) { c.Cluster, c.Prefix = "", "/x\x00/" }, nil},
		{"negative drain", func(c *Config) { c.DrainTimeout = -time.Second }, nil},
		{"max txn ops 1", func(c *Config) { c.MaxTxnOps = 1 }, nil},
		{"negative max txn ops", func(c *Config) { c.MaxTxnOps = -1 }, nil},
		{"nil fencer", func(c *Config) { c.Fencers = []fence.Fencer{nil} }, nil},
		{"address too long", func(c *Config) { c.Addr = strings.Repeat("a", 2000) }, nil},
		{"session TTL too short", func(c *Config) { c.Session.TTL = time.Second }, []error{election.ErrInvalidConfig}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.edit(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tt.wants {
				require.ErrorIs(t, err, w)
			}
		})
	}
	// Zero durations and sizes take their defaults; a prefix replaces the
	// cluster name.
	cfg := Config{Prefix: "/x/", NodeID: "n", Ring: ring.DefaultConfig()}
	require.NoError(t, cfg.Validate())
}

func TestJoinBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := Join(ctx, nil, DefaultConfig())
	require.ErrorIs(t, err, ErrNilArgument)

	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	for _, id := range []string{"", "a\x00b", "a/b"} {
		cfg := testConfig(t, "bad", id, 8)
		_, err := Join(ctx, cli, cfg)
		require.ErrorIs(t, err, ring.ErrInvalidNodeID, "id %q", id)
	}
	cfg := testConfig(t, "bad", "n", 0)
	_, err = Join(ctx, cli, cfg)
	require.ErrorIs(t, err, ring.ErrInvalidPartitions)
	cfg = testConfig(t, "bad", "n", 8)
	cfg.Ring.LoadFactor = 0.5
	_, err = Join(ctx, cli, cfg)
	require.ErrorIs(t, err, ring.ErrInvalidLoadFactor)
	// Nothing was registered.
	require.Empty(t, etcdMembers(t, cli, "bad"))
}

func TestDuplicateMember(t *testing.T) {
	c := cluster.New(t, 3)
	cli1, cli2 := c.NewClient(t), c.NewClient(t)
	a := join(t, cli1, testConfig(t, "dup", "a", 16))

	ctx := context.Background()
	_, err := Join(ctx, cli2, testConfig(t, "dup", "a", 16))
	require.ErrorIs(t, err, ErrDuplicateMember)
	var dup *DuplicateMemberError
	require.ErrorAs(t, err, &dup)
	assert.Equal(t, "a", dup.ID)
	assert.NotZero(t, dup.Lease)
	assert.Contains(t, err.Error(), `"a"`)
	// The failed attempt left no trace: a is still the only member.
	require.Equal(t, []string{"a"}, etcdMembers(t, cli1, "dup"))

	// Once a leaves, the ID is free again.
	require.NoError(t, a.Close(ctx))
	a2 := join(t, cli2, testConfig(t, "dup", "a", 16))
	waitStable(t, 20*time.Second, a2)
}

func TestNodesServeTheirRingPartitions(t *testing.T) {
	c := cluster.New(t, 3)
	const parts = 128
	var nodes []*Node
	events := map[string]<-chan Event{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		cfg := testConfig(t, "serve", id, parts)
		cfg.Meta = map[string]string{"zone": fmt.Sprint("z", i)}
		n, ch, dropped := joinWithEvents(t, c.NewClient(t), cfg, 4*parts)
		t.Cleanup(func() { assert.Zero(t, dropped()) })
		events[id] = ch
		nodes = append(nodes, n)
	}
	waitStable(t, 30*time.Second, nodes...)

	n0 := nodes[0]
	ms := n0.Members()
	require.Len(t, ms, 3)
	for i, m := range ms {
		assert.Equal(t, fmt.Sprintf("n%d", i), m.ID)
		assert.Equal(t, m.ID+".test:7000", m.Addr)
		assert.Equal(t, fmt.Sprint("z", i), m.Meta["zone"])
	}

	// etcd agrees with the nodes.
	claims := etcdClaims(t, c.NewClient(t), "serve")
	require.Len(t, claims, parts)
	rg := n0.Ring()
	for p, cl := range claims {
		owner, _ := rg.Owner(p)
		assert.Equal(t, owner, cl.Owner, "partition %d", p)
	}

	for _, n := range nodes {
		owned := n.Owned()
		require.Equal(t, rg.Owned(n.ID()), owned)
		// Per partition, tenures alternate OnAcquired, OnReleased(moved)
		// with increasing epochs; the partitions owned now end with an
		// OnAcquired carrying the current epoch.
		last := map[int]Event{}
		ch := events[n.ID()]
	drain:
		for {
			select {
			case e := <-ch:
				prev, seen := last[e.Partition]
				switch e.Kind {
				case EventAcquired:
					require.True(t, !seen || prev.Kind == EventReleased, "%s: %+v after %+v", n.ID(), e, prev)
					require.True(t, !seen || e.Token.Compare(prev.Token) > 0, "%s: %+v after %+v", n.ID(), e, prev)
					tok, ok := fence.FromContext(e.Context)
					require.True(t, ok)
					require.Equal(t, e.Token, tok)
				case EventReleased:
					require.True(t, seen && prev.Kind == EventAcquired && prev.Token == e.Token, "%s: %+v after %+v", n.ID(), e, prev)
					require.Equal(t, ErrMoved, e.Reason)
					require.ErrorIs(t, context.Cause(prev.Context), ErrMoved)
				}
				last[e.Partition] = e
			default:
				break drain
			}
		}
		for p, e := range last {
			want := slices.Contains(owned, p)
			require.Equal(t, want, e.Kind == EventAcquired, "%s: partition %d: %+v", n.ID(), p, e)
			if want {
				r := n.LookupPartition(p)
				require.Equal(t, fence.Token{Scope: fence.PartitionScope(p), Epoch: r.Epoch}, e.Token)
				require.Equal(t, claims[p].Epoch, r.Epoch)
			}
		}
		for _, p := range owned {
			require.Contains(t, last, p)
		}
	}

	// Hold: local work gets the token and the partition's context; remote
	// keys get a wrong-owner error with a hint.
	for i := range 50 {
		key := fmt.Sprintf("key-%d", i)
		p := ring.PartitionOf(key, n0.Ring().Partitions())
		r := n0.Lookup(key)
		require.Equal(t, p, r.Partition)
		h, err := n0.Hold(key)
		if r.Local {
			require.NoError(t, err)
			require.Equal(t, p, h.Partition)
			require.Equal(t, fence.Token{Scope: fence.PartitionScope(p), Epoch: r.Epoch}, h.Token)
			require.NoError(t, h.Context.Err())
			h.Release()
			h.Release() // no effect
			continue
		}
		require.ErrorIs(t, err, ErrNotOwner)
		require.NotErrorIs(t, err, ErrReleasing)
		var wo *WrongOwnerError
		require.ErrorAs(t, err, &wo)
		require.Equal(t, WrongOwnerError{Route: fleet.Route{Partition: p, Owner: r.Owner, Addr: r.Addr, Epoch: r.Epoch, RingVersion: r.RingVersion}}, *wo)
	}
	_, err := n0.HoldPartition(parts)
	require.ErrorIs(t, err, fleet.ErrInvalidPartition)
	_, err = n0.HoldPartition(-1)
	require.ErrorIs(t, err, fleet.ErrInvalidPartition)
	require.Equal(t, fleet.Route{Partition: -1, RingVersion: rg.Version()}, n0.LookupPartition(-1))
}

func TestCloseHandsOff(t *testing.T) {
	c := cluster.New(t, 3)
	const parts = 64
	a := join(t, c.NewClient(t), testConfig(t, "close", "a", parts))
	b, ch, _ := joinWithEvents(t, c.NewClient(t), testConfig(t, "close", "b", parts), 4*parts)
	waitStable(t, 30*time.Second, a, b)

	owned := b.Owned()
	require.NotEmpty(t, owned)
	ctxs := map[int]context.Context{}
	for range owned {
		e := <-ch
		require.Equal(t, EventAcquired, e.Kind)
		ctxs[e.Partition] = e.Context
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, b.Close(ctx))
	require.NoError(t, b.Close(ctx), "Close is idempotent")
	select {
	case <-b.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	// Every tenure ended with ErrClosed, its context cancelled with
	// ErrClosed.
	released := map[int]bool{}
	for range owned {
		e := <-ch
		require.Equal(t, EventReleased, e.Kind)
		require.Equal(t, ErrClosed, e.Reason)
		released[e.Partition] = true
		require.ErrorIs(t, context.Cause(ctxs[e.Partition]), ErrClosed)
	}
	require.Len(t, released, len(owned))
	_, err := b.Hold("x")
	require.ErrorIs(t, err, ErrClosed)
	require.Empty(t, b.Owned())

	// a takes everything over; b's member key is gone.
	waitStable(t, 20*time.Second, a)
	require.Equal(t, []string{"a"}, etcdMembers(t, c.NewClient(t), "close"))
	require.Len(t, a.Owned(), parts)
}

func TestFencersRunBeforeWork(t *testing.T) {
	c := cluster.New(t, 3)
	const parts = 16
	var gate fence.Gate
	block := make(chan struct{})
	failures := 0
	const blocked = 3
	cfg := testConfig(t, "fence", "a", parts)
	cfg.Fencers = []fence.Fencer{
		fence.FencerFunc(func(ctx context.Context, tok fence.Token) error { return gate.Advance(ctx, tok) }),
		fence.FencerFunc(func(ctx context.Context, tok fence.Token) error {
			if tok.Scope != fence.PartitionScope(blocked) {
				return nil
			}
			// Fail twice, then wait for the test.
			if failures < 2 {
				failures++
				return errors.New("store unavailable")
			}
			select {
			case <-block:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}),
	}
	acquired := make(chan fence.Token, parts)
	cfg.Callbacks.OnAcquired = func(e Event) {
		tok := e.Token
		// The fence floor is raised before the tenure starts.
		assert.Equal(t, tok.Epoch, gate.Floor(tok.Scope))
		acquired <- tok
	}
	a := join(t, c.NewClient(t), cfg)
	// Everything but the blocked partition is served.
	require.NoError(t, waitFor(20*time.Second, func() error {
		if got := len(a.Owned()); got != parts-1 {
			return fmt.Errorf("owned %d", got)
		}
		return nil
	}, a))
	require.False(t, slices.Contains(a.Owned(), blocked))
	// Claimed, not yet served: Lookup does not name a as the owner of a
	// partition it does not serve; Hold says that a is acquiring it.
	r := a.LookupPartition(blocked)
	require.False(t, r.Local)
	require.Empty(t, r.Owner)
	require.Zero(t, r.Epoch)
	require.NotZero(t, etcdClaims(t, c.NewClient(t), "fence")[blocked].Epoch, "claimed")
	_, err := a.HoldPartition(blocked)
	var wo *WrongOwnerError
	require.ErrorAs(t, err, &wo)
	require.Equal(t, "a", wo.Owner)
	require.True(t, wo.Acquiring)
	require.False(t, wo.Releasing)

	close(block)
	require.NoError(t, waitFor(20*time.Second, func() error {
		if !a.LookupPartition(blocked).Local {
			return errors.New("not served")
		}
		return nil
	}, a))
	h, err := a.HoldPartition(blocked)
	require.NoError(t, err)
	require.NoError(t, gate.Check(h.Token))
	h.Release()
	require.Equal(t, 2, failures)
	// OnAcquired runs on the callback goroutine, shortly after.
	seen := map[string]bool{}
	for len(seen) < parts {
		select {
		case tok := <-acquired:
			seen[tok.Scope] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("OnAcquired for %d of %d partitions", len(seen), parts)
		}
	}
}

// A node whose etcd client is closed under it cannot rejoin: it stops as
// if killed, reports its partitions lost, and says why; the others take its
// partitions over once its lease expires.
func TestClientClosedStopsNode(t *testing.T) {
	c := cluster.New(t, 1)
	const parts = 16
	cliA := c.NewClient(t)
	a, events, _ := joinWithEvents(t, cliA, testConfig(t, "closed-client", "a", parts), 4*parts)
	b := join(t, c.NewClient(t), testConfig(t, "closed-client", "b", parts))
	waitStable(t, 20*time.Second, a, b)
	ownedBefore := a.Owned()
	require.NotEmpty(t, ownedBefore)

	require.NoError(t, cliA.Close())
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not stop after its client was closed")
	}
	err := a.Close(context.Background())
	require.ErrorIs(t, err, ErrClientClosed)
	assert.Empty(t, a.Owned())

	// Every callback has returned once Done is closed: the last event of
	// each partition a owned says it was lost.
	last := map[int]Event{}
	for len(events) > 0 {
		e := <-events
		last[e.Partition] = e
	}
	for _, p := range ownedBefore {
		assert.Equal(t, EventReleased, last[p].Kind, "partition %d", p)
		assert.Equal(t, ErrLost, last[p].Reason, "partition %d", p)
	}
	waitStable(t, 20*time.Second, b)
	assert.Len(t, b.Owned(), parts)
}
