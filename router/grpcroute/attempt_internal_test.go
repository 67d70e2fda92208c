package grpcroute

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/router"
)

// TestAttemptClock: an attempt's clock runs once the balancer sent it
// and while the caller waits on it, from the later of the wait's start
// and the last message sent, until the node answers; at the bound the
// attempt is cut off, and its error says so. fire is called by hand after
// each move of the clock, so that what it decides is known when the test
// looks (the timer's own call decides the same).
func TestAttemptClock(t *testing.T) {
	const bound = time.Second
	fc := clockwork.NewFakeClock()
	c := &Client{cfg: ClientConfig{AttemptTimeout: bound, SessionTTL: 2 * time.Second, Clock: fc}.withDefaults()}
	advance := func(a *attempt, d time.Duration) {
		fc.Advance(d)
		a.fire()
	}
	cut := func(t *testing.T, a *attempt) {
		t.Helper()
		select {
		case <-a.ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the attempt was not cut off")
		}
		err := a.end(context.Background(), "10.0.0.1:7000", status.FromContextError(context.Canceled).Err())
		require.ErrorIs(t, err, router.ErrAttemptTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.EqualError(t, err, "grpcroute: 10.0.0.1:7000 did not answer within 1s (AttemptTimeout; the fleet's session TTL is 2s)")
	}
	notCut := func(t *testing.T, a *attempt) {
		t.Helper()
		require.NoError(t, a.ctx.Err(), "the attempt was cut off")
	}

	t.Run("unary: from the pick until the answer", func(t *testing.T) {
		a := c.newAttempt(context.Background())
		a.enter()
		advance(a, 10*bound) // waiting for the owner's connection: the call's deadline bounds it
		notCut(t, a)
		a.start()
		advance(a, bound-time.Millisecond)
		notCut(t, a)
		advance(a, time.Millisecond)
		cut(t, a)
	})
	t.Run("answered in time", func(t *testing.T) {
		a := c.newAttempt(context.Background())
		a.enter()
		a.start()
		advance(a, bound/2)
		a.answer()
		advance(a, 10*bound)
		notCut(t, a)
		want := errors.New("the handler's error")
		assert.Equal(t, want, a.end(context.Background(), "addr", want))
	})
	t.Run("stream: only the caller's waits count, from its last message", func(t *testing.T) {
		a := c.newAttempt(context.Background())
		a.start()
		advance(a, 10*bound) // the caller works or sends: nobody waits
		notCut(t, a)
		a.enter() // RecvMsg
		advance(a, bound-time.Millisecond)
		notCut(t, a)
		a.progress() // a message sent from another goroutine
		advance(a, bound-time.Millisecond)
		notCut(t, a)
		a.enter() // a SendMsg that blocks
		a.leave(true)
		advance(a, bound-time.Millisecond)
		notCut(t, a)
		a.leave(false)       // RecvMsg returned (its error is the stream's)
		advance(a, 10*bound) // nobody waits
		notCut(t, a)
		a.enter() // a wait starts again: counted from its start
		advance(a, bound-time.Millisecond)
		notCut(t, a)
		advance(a, time.Millisecond)
		cut(t, a)
	})
	t.Run("stream: never cut once answered", func(t *testing.T) {
		a := c.newAttempt(context.Background())
		a.start()
		a.answer() // the header came
		a.enter()
		advance(a, 10*bound)
		notCut(t, a)
		a.leave(false)
		assert.NoError(t, a.end(context.Background(), "addr", nil))
	})
	t.Run("the call's context ended first", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		a := c.newAttempt(ctx)
		a.enter()
		a.start()
		advance(a, bound)
		<-a.ctx.Done()
		cancel()
		want := status.FromContextError(context.Canceled).Err()
		assert.Equal(t, want, a.end(ctx, "addr", want), "the caller's own end is not the bound's")
	})
	t.Run("no bound", func(t *testing.T) {
		c := &Client{cfg: ClientConfig{AttemptTimeout: -1, Clock: fc}.withDefaults()}
		ctx := context.Background()
		a := c.newAttempt(ctx)
		require.Nil(t, a)
		a.enter()
		a.start()
		a.progress()
		a.answer()
		a.leave(true)
		assert.Equal(t, ctx, a.context(ctx))
		want := errors.New("x")
		assert.Equal(t, want, a.end(ctx, "addr", want))
	})
}
