package router_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

var _ router.Node = (*ownership.Node)(nil)

func TestDoLocalAndWrongOwner(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "do", fleetOptions{})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	ctx := context.Background()
	for i := range 20 {
		key := string(rune('a'+i%26)) + "-key"
		owner := f.owner(key)
		require.NotNil(t, owner, key)
		route := owner.node.Lookup(key)

		ran := false
		err := owner.router.Do(ctx, key, func(ctx context.Context, tok fence.Token) error {
			ran = true
			assert.Equal(t, fence.Token{Scope: fence.PartitionScope(route.Partition), Epoch: route.Epoch}, tok)
			got, ok := fence.FromContext(ctx)
			assert.True(t, ok)
			assert.Equal(t, tok, got)
			return nil
		})
		require.NoError(t, err)
		assert.True(t, ran)

		// fn's error comes back unchanged.
		boom := errors.New("boom")
		assert.Same(t, boom, owner.router.Do(ctx, key, func(context.Context, fence.Token) error { return boom }))

		for _, m := range f.list() {
			if m == owner {
				continue
			}
			err := m.router.Do(ctx, key, func(context.Context, fence.Token) error {
				t.Errorf("%s ran work for %s owned by %s", m.id, key, owner.id)
				return nil
			})
			require.ErrorIs(t, err, ownership.ErrNotOwner)
			require.NotErrorIs(t, err, ownership.ErrNoOwner)
			require.ErrorIs(t, err, ownership.ErrNotOwner, "the node's error is wrapped")
			var we *ownership.WrongOwnerError
			require.ErrorAs(t, err, &we)
			assert.Equal(t, route.Partition, we.Partition)
			assert.Equal(t, owner.id, we.Owner)
			assert.Equal(t, owner.addr, we.Addr)
			assert.Equal(t, route.Epoch, we.Epoch)
			assert.Equal(t, m.node.Lookup(key).RingVersion, we.RingVersion)
		}
	}
}

func TestDoArguments(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "args", fleetOptions{Partitions: 4})
	m := f.start("solo")
	f.waitStable()

	_, err := router.New(nil, router.DefaultConfig())
	assert.ErrorIs(t, err, router.ErrNilArgument)
	_, err = router.New((*ownership.Node)(nil), router.DefaultConfig())
	assert.ErrorIs(t, err, router.ErrNilArgument)
	_, err = router.New(m.node, router.Config{HandoffWait: -time.Second})
	assert.ErrorIs(t, err, router.ErrInvalidConfig)
	_, err = router.New(m.node, router.Config{Scheme: "ftp"})
	assert.ErrorIs(t, err, router.ErrInvalidConfig)

	assert.ErrorIs(t, m.router.Do(context.Background(), "k", nil), router.ErrNilArgument)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = m.router.Do(ctx, "k", func(context.Context, fence.Token) error { return nil })
	assert.ErrorIs(t, err, context.Canceled)
}

// TestDoInFlightAndPartitionContext shows that Do's work counts as in flight:
// a graceful Close of the node cancels the work's context with the
// partition's cause and waits for the work to return before it releases
// the partition.
func TestDoInFlightAndPartitionContext(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "inflight", fleetOptions{Partitions: 4, DrainTimeout: 20 * time.Second})
	m := f.start("solo")
	f.waitStable()

	started, release := make(chan struct{}), make(chan struct{})
	doErr := make(chan error, 1)
	var cause error
	go func() {
		doErr <- m.router.Do(context.Background(), "k", func(ctx context.Context, _ fence.Token) error {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			<-release
			return nil
		})
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- m.node.Close(context.Background()) }()
	select {
	case <-closed:
		t.Fatal("Close returned while work was in flight")
	case <-time.After(200 * time.Millisecond):
		// Close is draining. This bounded wait only gives Close a chance to
		// return too early; nothing depends on its length.
	}
	close(release)
	require.NoError(t, <-doErr)
	require.NoError(t, <-closed)
	assert.ErrorIs(t, cause, ownership.ErrClosed, "the work's context ends with the partition's")

	err := m.router.Do(context.Background(), "k", func(context.Context, fence.Token) error { return nil })
	assert.ErrorIs(t, err, router.ErrClosed)
	m.router.Close()
}

// blockingFencer holds every Advance until released, so that a node keeps
// its newly claimed partitions in the acquiring state.
type blockingFencer struct{ release chan struct{} }

func (b *blockingFencer) Advance(ctx context.Context, _ fence.Token) error {
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestDoWaitsForAcquisition shows the handoff wait: while the node has
// claimed a partition but not yet advanced its fencers, Do waits (bounded by
// HandoffWait and ctx) instead of failing, and proceeds as soon as the
// partition is served.
func TestDoWaitsForAcquisition(t *testing.T) {
	etcd := cluster.New(t, 1)
	bf := &blockingFencer{release: make(chan struct{})}
	f := newFleet(t, etcd, "acquire", fleetOptions{
		Partitions: 4,
		Fencers:    []fence.Fencer{bf},
		Router:     router.Config{HandoffWait: 100 * time.Millisecond},
	})
	m := f.start("solo")
	noop := func(context.Context, fence.Token) error { return nil }

	// Bounded by HandoffWait.
	err := m.router.Do(context.Background(), "k", noop)
	require.ErrorIs(t, err, ownership.ErrNotOwner)
	var we *ownership.WrongOwnerError
	require.ErrorAs(t, err, &we)
	assert.Equal(t, "solo", we.Owner, "the node names itself as the owner to be")

	// Bounded by ctx.
	long, err := router.New(m.node, router.Config{HandoffWait: time.Hour})
	require.NoError(t, err)
	defer long.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = long.Do(ctx, "k", noop)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ownership.ErrNotOwner)
	done := make(chan error, 1)

	// Released while waiting: Do proceeds.
	ran := make(chan fence.Token, 1)
	go func() {
		done <- long.Do(context.Background(), "k", func(_ context.Context, tok fence.Token) error {
			ran <- tok
			return nil
		})
	}()
	close(bf.release)
	require.NoError(t, <-done)
	tok := <-ran
	assert.Equal(t, m.node.Lookup("k").Epoch, tok.Epoch)
}
