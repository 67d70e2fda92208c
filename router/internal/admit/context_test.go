package admit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/internal/admit"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

type callerKey struct{}
type extraKey struct{}

var errCaller = errors.New("the caller went away")

// partition returns a partition's context as an ownership.Node gives it
// (cancellable, carrying its token and a signature) and its end.
func partition(t *testing.T) (ownership.Held, context.CancelCauseFunc) {
	ctx, end := context.WithCancelCause(context.Background())
	t.Cleanup(func() { end(ownership.ErrClosed) })
	tok := fence.Token{Epoch: 7}
	sig := fence.Signature{KeyID: "k1", Sig: [64]byte{1}}
	return ownership.Held{Token: tok, Context: fence.NewSignedContext(ctx, tok, sig)}, end
}

// caller returns a caller's context with a value and a token of its own,
// and its end.
func caller(t *testing.T) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	ctx = context.WithValue(ctx, callerKey{}, "caller")
	return fence.NewContext(ctx, fence.Token{Epoch: 3}), cancel
}

func TestWorkContextValues(t *testing.T) {
	h, _ := partition(t)
	ctx, _ := caller(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w := admit.WorkContext(ctx, h, extraKey{}, "extra")
	defer w.Release()

	tok, ok := fence.FromContext(w)
	require.True(t, ok)
	assert.Equal(t, h.Token, tok, "the partition's token wins over the caller's")
	sig, ok := fence.SignatureFromContext(w)
	assert.True(t, ok, "the partition's signature")
	assert.Equal(t, "k1", sig.KeyID)
	assert.Equal(t, "caller", w.Value(callerKey{}))
	assert.Equal(t, "extra", w.Value(extraKey{}))
	var other int
	assert.Nil(t, w.Value(&other), "a *int key that nothing set")
	d, ok := w.Deadline()
	assert.True(t, ok)
	assert.Equal(t, deadline, d)
	require.NoError(t, w.Err())
	require.NoError(t, context.Cause(w))
	select {
	case <-w.Done():
		t.Fatal("done before anything ended")
	default:
	}
}

// ask is a way to ask a work context about its end first.
var asks = map[string]func(context.Context){
	"Done":  func(w context.Context) { <-w.Done() },
	"Err":   func(w context.Context) { _ = w.Err() },
	"Cause": func(w context.Context) { _ = context.Cause(w) },
	"child": func(w context.Context) { c, cancel := context.WithCancel(w); <-c.Done(); cancel() },
}

// ended checks that w has ended with cause, Done, Err and Cause agreeing,
// and that a child context ends with it and the same cause.
func ended(t *testing.T, w context.Context, cause error) {
	t.Helper()
	select {
	case <-w.Done():
	default:
		t.Fatal("Err says ended, Done is not closed")
	}
	assert.ErrorIs(t, w.Err(), context.Canceled)
	assert.Equal(t, cause, context.Cause(w))
	c, cancel := context.WithCancel(w)
	defer cancel()
	<-c.Done()
	assert.Equal(t, cause, context.Cause(c))
}

func TestWorkContextEnds(t *testing.T) {
	for name, ask := range asks {
		t.Run("caller/"+name, func(t *testing.T) {
			h, _ := partition(t)
			ctx, cancel := caller(t)
			w := admit.WorkContext(ctx, h, nil, nil)
			defer w.Release()
			cancel(errCaller)
			ask(w)
			ended(t, w, errCaller)
		})
		t.Run("partition/"+name, func(t *testing.T) {
			h, end := partition(t)
			ctx, _ := caller(t)
			w := admit.WorkContext(ctx, h, nil, nil)
			defer w.Release()
			end(ownership.ErrMoved)
			ask(w)
			ended(t, w, ownership.ErrMoved)
		})
		t.Run("followed/caller/"+name, func(t *testing.T) {
			h, _ := partition(t)
			ctx, cancel := caller(t)
			w := admit.WorkContext(ctx, h, nil, nil)
			defer w.Release()
			done := w.Done()
			cancel(errCaller)
			<-done
			ask(w)
			ended(t, w, errCaller)
		})
		t.Run("followed/partition/"+name, func(t *testing.T) {
			h, end := partition(t)
			ctx, _ := caller(t)
			w := admit.WorkContext(ctx, h, nil, nil)
			defer w.Release()
			done := w.Done()
			end(ownership.ErrMoved)
			<-done
			ask(w)
			ended(t, w, ownership.ErrMoved)
		})
		t.Run("never-ending-caller/"+name, func(t *testing.T) {
			h, end := partition(t)
			w := admit.WorkContext(context.Background(), h, nil, nil)
			defer w.Release()
			end(ownership.ErrLost)
			ask(w)
			ended(t, w, ownership.ErrLost)
		})
	}
}

func TestWorkContextBothEnd(t *testing.T) {
	t.Run("caller first, asked between", func(t *testing.T) {
		h, end := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		defer w.Release()
		cancel(errCaller)
		require.Error(t, w.Err())
		end(ownership.ErrMoved)
		ended(t, w, errCaller)
	})
	t.Run("partition first, asked between", func(t *testing.T) {
		h, end := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		defer w.Release()
		end(ownership.ErrMoved)
		require.Equal(t, ownership.ErrMoved, context.Cause(w))
		cancel(errCaller)
		ended(t, w, ownership.ErrMoved)
	})
	t.Run("partition first, Cause asked after both", func(t *testing.T) {
		h, end := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		defer w.Release()
		end(ownership.ErrMoved)
		cancel(errCaller)
		assert.Equal(t, ownership.ErrMoved, context.Cause(w))
		ended(t, w, ownership.ErrMoved)
	})
	t.Run("partition first while a child waits", func(t *testing.T) {
		h, end := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		defer w.Release()
		child, stop := context.WithTimeout(w, time.Hour)
		defer stop()
		end(ownership.ErrMoved)
		<-child.Done()
		cancel(errCaller)
		assert.Equal(t, ownership.ErrMoved, context.Cause(child))
		ended(t, w, ownership.ErrMoved)
	})
}

func TestWorkContextDeadline(t *testing.T) {
	h, _ := partition(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	w := admit.WorkContext(ctx, h, nil, nil)
	defer w.Release()
	<-w.Done()
	assert.ErrorIs(t, w.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(w), context.DeadlineExceeded)
}

func TestWorkContextRelease(t *testing.T) {
	t.Run("followed", func(t *testing.T) {
		h, end := partition(t)
		ctx, _ := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		ran := make(chan struct{})
		context.AfterFunc(w, func() { close(ran) })
		w.Release()
		<-ran
		end(ownership.ErrMoved)
		ended(t, w, context.Canceled)
	})
	t.Run("not followed", func(t *testing.T) {
		h, end := partition(t)
		ctx, _ := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		w.Release()
		end(ownership.ErrMoved)
		ended(t, w, context.Canceled)
	})
	t.Run("not followed, the partition ended before", func(t *testing.T) {
		h, end := partition(t)
		ctx, _ := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		end(ownership.ErrMoved)
		w.Release()
		ended(t, w, ownership.ErrMoved)
	})
	t.Run("not followed, the caller ended before", func(t *testing.T) {
		h, _ := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		cancel(errCaller)
		w.Release()
		ended(t, w, errCaller)
	})
}

// TestWorkContextConcurrent asks a work context about its end from many
// goroutines while the partition ends (run it with -race): all see the
// same end.
func TestWorkContextConcurrent(t *testing.T) {
	for range 50 {
		h, end := partition(t)
		ctx, cancel := caller(t)
		w := admit.WorkContext(ctx, h, nil, nil)
		var wg sync.WaitGroup
		causes := make([]error, 8)
		for i := range causes {
			wg.Go(func() {
				switch i % 3 {
				case 0:
					<-w.Done()
				case 1:
					for w.Err() == nil {
						time.Sleep(time.Microsecond)
					}
				case 2:
					for context.Cause(w) == nil {
						time.Sleep(time.Microsecond)
					}
				}
				causes[i] = context.Cause(w)
			})
		}
		end(ownership.ErrMoved)
		cancel(errCaller)
		wg.Wait()
		for _, c := range causes {
			assert.Equal(t, causes[0], c)
		}
		w.Release()
	}
}

// TestWorkContextAllocs: work that never asks about its end costs one
// allocation, its values included.
func TestWorkContextAllocs(t *testing.T) {
	h, _ := partition(t)
	ctx, _ := caller(t)
	var key any = "k"
	allocs := testing.AllocsPerRun(100, func() {
		w := admit.WorkContext(ctx, h, extraKey{}, key)
		_, _ = fence.FromContext(w)
		_ = w.Value(callerKey{})
		_ = w.Err()
		w.Release()
	})
	assert.Equal(t, 1.0, allocs)
}
